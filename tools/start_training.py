#!/usr/bin/env python3
"""Start one QLoRA training run: validate the input, then StartExecution on the environment's state machine.

    tools/start_training.py --env dev --data s3://<bucket>/datasets/train.jsonl [--eval-data s3://...] [--set lora_r=16]

--data takes a file, a folder (ending in /) or a folder's completion marker `datasets/<name>/_READY`, which
is sent as its folder. The input is checked (shape, datasets/ prefix, hyperparameter names and types against
train.py) before any AWS call, and the bucket against the Data stack's artifact bucket before the execution
starts. A bad input exits 2 with one line; an AWS error exits 1 with one line. AWS_ENDPOINT_URL points it at
an emulator.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from stacks.config import ConfigError, load_config  # noqa: E402
from stacks.training.execution_input import InputError, validate_execution_input  # noqa: E402

PROG = "start_training"


class UsageError(Exception):
    """Bad command line; one line, exit 2."""


def _overrides(pairs: list[str]) -> dict[str, str]:
    out: dict[str, str] = {}
    for pair in pairs:
        name, sep, value = pair.partition("=")
        if not sep or not name:
            raise UsageError(f"--set {pair!r}: expected NAME=VALUE")
        out[name] = value
    return out


def build_input(args: argparse.Namespace) -> dict[str, Any]:
    """The execution input from --input (JSON text or @file) or from --data/--set."""
    if args.input is not None:
        if args.data or args.set or args.eval_data:
            raise UsageError("--input replaces --data, --eval-data and --set; give one or the other")
        text = Path(args.input[1:]).read_text(encoding="utf-8") if args.input.startswith("@") else args.input
        try:
            return json.loads(text)
        except json.JSONDecodeError as err:
            raise UsageError(f"--input: not JSON: {err.msg} at line {err.lineno} column {err.colno}") from None
    if not args.data:
        raise UsageError("--data s3://<artifact bucket>/datasets/... is required (or --input)")
    built = {"train_data": args.data, "hyperparameters": _overrides(args.set)}
    return {**built, "eval_data": args.eval_data} if args.eval_data else built


def _stack_outputs(cloudformation: Any, stack_name: str) -> dict[str, str]:
    stack = cloudformation.describe_stacks(StackName=stack_name)["Stacks"][0]
    return {o["OutputKey"]: o["OutputValue"] for o in stack.get("Outputs", [])}


def start(execution_input: dict[str, Any], *, config: Any, name: str | None, session: Any = None) -> str:
    """Check the bucket against the deployed Data stack, start the Training stack's execution, return its ARN."""
    import boto3

    session = session or boto3.session.Session()
    cloudformation = session.client("cloudformation")
    bucket = _stack_outputs(cloudformation, config.stack_id("Data"))["ArtifactBucketName"]
    checked = validate_execution_input(execution_input, bucket=bucket, training=config.training)
    state_machine = _stack_outputs(cloudformation, config.stack_id("Training"))["StateMachineArn"]
    request = {"stateMachineArn": state_machine, "input": json.dumps(checked, sort_keys=True)}
    if name:
        request["name"] = name
    return session.client("stepfunctions").start_execution(**request)["executionArn"]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog=PROG, description=__doc__.splitlines()[0])
    parser.add_argument("--env", default="dev", help="environment (config/<env>.yaml)")
    parser.add_argument("--data", help="s3://<artifact bucket>/datasets/<file, folder/ or folder/_READY>")
    parser.add_argument("--eval-data", help="s3://<artifact bucket>/datasets/...: the job's `eval` channel (optional)")
    parser.add_argument("--set", action="append", default=[], metavar="NAME=VALUE", help="hyperparameter override")
    parser.add_argument("--input", help="the whole execution input as JSON, or @file.json")
    parser.add_argument("--name", help="execution name (default: generated)")
    parser.add_argument("--dry-run", action="store_true", help="validate the input shape and print it; no AWS call")
    args = parser.parse_args(argv)
    try:
        config = load_config(args.env, ROOT / "config")
        checked = validate_execution_input(build_input(args), bucket=None, training=config.training)
    except (ConfigError, InputError, UsageError) as err:
        print(f"{PROG}: error: {err}", file=sys.stderr)
        return 2
    if args.dry_run:
        print(json.dumps(checked, sort_keys=True))
        return 0
    try:
        arn = start(checked, config=config, name=args.name)
    except InputError as err:
        print(f"{PROG}: error: {err}", file=sys.stderr)
        return 2
    except Exception as err:  # noqa: BLE001 - any AWS/credential failure becomes one line
        first = str(err).splitlines()[0] if str(err) else type(err).__name__
        print(f"{PROG}: aws error: {type(err).__name__}: {first}", file=sys.stderr)
        return 1
    print(arn)
    return 0


if __name__ == "__main__":
    sys.exit(main())
