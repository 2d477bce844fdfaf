#!/usr/bin/env python3
"""CDK entry point: read `-c env=NAME`, validate config/NAME.yaml, then build every stack.

The configuration is validated before aws_cdk is imported, so a bad setting fails in well under a
second with one line on stderr and exit code 2, never a traceback.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from stacks.config import ConfigError, load_config
from stacks.paths import KERNEL_PRELOAD

DEFAULT_ENV = "dev"


def node_options_quoted(value: str) -> str:
    """`value` as one NODE_OPTIONS word: double-quoted, `\\` and `"` escaped (node's own parsing rules)."""
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


# Options for the jsii kernel's node process, which runs single-use code (the constructs, aws-cdk-lib's WebAssembly
# template validator) on every synth (bench/synth_time.py, in README.md's benchmark table). Set in NODE_OPTIONS
# before aws_cdk is imported, which starts that process. Each is keyed by what shows it is already set:
# - V8's worker threads spent more CPU compiling and collecting that code in the background than they saved;
# - the preload keeps WebAssembly on V8's baseline compiler: node's exit waited ~1.1 s for a background TurboFan
#   compile of the validator's hottest function (stacks/kernel_preload.cjs).
def kernel_node_option_table(preload: Path) -> dict[str, str]:
    """Option by the text that shows it is set; the preload's key is its quoted path, the very word added."""
    preload_word = node_options_quoted(str(preload))
    return {"--v8-pool-size": "--v8-pool-size=0", preload_word: f"--require {preload_word}"}


KERNEL_NODE_OPTIONS = kernel_node_option_table(KERNEL_PRELOAD)


def read_context() -> dict:
    """The context the CDK CLI hands the app (cdk.json plus every `-c key=value`)."""
    context: dict = {}
    overflow = os.environ.get("CDK_CONTEXT_OVERFLOW_LOCATION")
    if overflow:
        with open(overflow, encoding="utf-8") as handle:
            context.update(json.load(handle))
    raw = os.environ.get("CDK_CONTEXT_JSON")
    if raw:
        context.update(json.loads(raw))
    return context


def main() -> int:
    kernel_node_options(os.environ)
    return run(read_context())


def kernel_node_options(environ: dict) -> None:
    """Add each of KERNEL_NODE_OPTIONS to NODE_OPTIONS (which the jsii kernel inherits) unless its key is there."""
    options = environ.get("NODE_OPTIONS", "")
    added = [option for key, option in KERNEL_NODE_OPTIONS.items() if key not in options]
    if added:
        environ["NODE_OPTIONS"] = " ".join([options, *added]).strip()


def run(cli_context: dict, **app_props) -> int:
    """Validate, build and synthesize one environment; `app_props` go to `App` (tests pass context/outdir,
    because the jsii runtime keeps the environment of the process it started in)."""
    try:
        config = load_config(cli_context.get("env", DEFAULT_ENV), cli_context.get("config_dir", "config"))
    except ConfigError as err:
        print(f"config error: {err}", file=sys.stderr)
        return 2
    from aws_cdk import App

    from stacks.application import build_app

    app = App(**app_props)
    try:
        build_app(app, config)  # cross-field checks that need the stacks raise ConfigError too
    except ConfigError as err:
        print(f"config error: {err}", file=sys.stderr)
        return 2
    for warning in config.warnings():  # after every check: a failing config prints its one error line alone
        print(f"config warning: {warning}", file=sys.stderr)
    app.synth()
    return 0


if __name__ == "__main__":
    sys.exit(main())
