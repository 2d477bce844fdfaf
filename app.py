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
from stacks.jsii_kernel import kernel_node_options

DEFAULT_ENV = "dev"


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
    kernel_node_options(os.environ)  # before aws_cdk is imported: importing it starts the jsii kernel
    return run(read_context())


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
    from stacks.shared.job_access import JobAccessError

    app = App(**app_props)
    try:
        build_app(app, config)  # cross-field checks that need the stacks raise ConfigError too
    except ConfigError as err:
        print(f"config error: {err}", file=sys.stderr)
        return 2
    except JobAccessError as err:  # a job step whose fixed role lacks what its request reads or writes
        print(f"job access error: {err}", file=sys.stderr)
        return 2
    for warning in config.warnings():  # after every check: a failing config prints its one error line alone
        print(f"config warning: {warning}", file=sys.stderr)
    app.synth()
    return 0


if __name__ == "__main__":
    sys.exit(main())
