"""The command line: exit 0 promoted (or verified), 2 refused, 1 an AWS error the checks did not foresee."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from tools.promote_model.aws import environment
from tools.promote_model.model import Promotion, Refused
from tools.promote_model.promote import promote, verify

ROOT = Path(__file__).resolve().parents[2]
DESCRIPTION = "Promote an Approved model package version into an environment: copy, register, write its model lock."


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m tools.promote_model", description=DESCRIPTION)
    parser.add_argument("--to", required=True, help="the environment to serve the version (config/<to>.yaml)")
    parser.add_argument("--from", dest="source", help="the environment whose registry holds it (default: --to)")
    parser.add_argument("--version", help="the model package version's ARN (Approved)")
    parser.add_argument("--verify", action="store_true", help="check --to's committed lock against AWS; write nothing")
    parser.add_argument("--config-dir", type=Path, default=ROOT / "config")
    parser.add_argument("--from-profile", help="AWS profile of the source environment's account")
    parser.add_argument("--to-profile", help="AWS profile of the target environment's account")
    parser.add_argument("--region", help="default: the environment's region, else the AWS configuration's")
    parser.add_argument("--endpoint-url", help="the emulator's URL (make deploy KEEP=1); default: AWS")
    return parser


def _promote(args: argparse.Namespace) -> Promotion | str:
    """The promotion, or the verified line (--verify)."""
    target = environment(args.to, args.config_dir, args.to_profile, args.region, args.endpoint_url)
    if args.verify:
        return verify(target, args.config_dir)
    source = target
    if args.source and args.source != args.to:
        source = environment(args.source, args.config_dir, args.from_profile, args.region, args.endpoint_url)
    return promote(args.version, source, target, args.config_dir)


def _print(done: Promotion) -> None:
    """The lock's diff on stderr; `key=value` lines for a CI step on stdout."""
    print(done.diff or f"{done.lock_file.name}: unchanged", file=sys.stderr)
    print(f"model_package_arn={done.model_package_arn}")
    print(f"source_model_package_arn={done.source_model_package_arn or ''}")
    print(f"lock={done.lock_file.as_posix()}")
    print(f"lock_changed={'true' if done.lock_changed else 'false'}")
    print(f"copied_objects={done.copied_objects}")


def main(argv: list[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    if not args.verify and not args.version:
        parser.error("--version is required (or --verify)")
    from botocore.exceptions import BotoCoreError, ClientError

    try:
        done = _promote(args)
    except Refused as err:
        print(f"promote_model: refused: {err}", file=sys.stderr)
        return 2
    except (ClientError, BotoCoreError) as err:
        print(f"promote_model: error: {' '.join(str(err).split())}", file=sys.stderr)
        return 1
    if isinstance(done, str):
        print(f"promote_model: verified {done}")
    else:
        _print(done)
    return 0
