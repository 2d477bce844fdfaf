#!/usr/bin/env python3
"""CDK entry point: read `-c env=NAME`, validate config/NAME.yaml, then build every stack.

The configuration is validated before aws_cdk is imported, so a bad setting fails in well under a
second with one line on stderr and exit code 2, never a traceback.
"""

from __future__ import annotations

import json
import os
import sys

from stacks.config import ConfigError, load_config

DEFAULT_ENV = "dev"
# The jsii kernel's node process runs single-use code (the constructs, the WebAssembly template validator): V8's
# worker threads spend more CPU compiling and collecting it in the background than they save, on every synth
# (bench/synth_time.py, in README.md's benchmark table). Set before aws_cdk is imported, which starts that process.
KERNEL_NODE_OPTION = "--v8-pool-size=0"


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
    """Add KERNEL_NODE_OPTION to NODE_OPTIONS (which the jsii kernel inherits) unless a pool size is set."""
    options = environ.get("NODE_OPTIONS", "")
    if "--v8-pool-size" not in options:
        environ["NODE_OPTIONS"] = f"{options} {KERNEL_NODE_OPTION}".strip()


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
