"""The command line: exit 0 written (or unchanged), 2 refused (one line, nothing written), 1 an error the checks
did not foresee (the hub or AWS unreachable; one line)."""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

from stacks.config import ConfigError
from stacks.config.base_model_record import BaseModelRecord
from stacks.paths import ROOT, relative
from stacks.serving.backends import backends
from tools.base_model.catalog import Written, plan, write
from tools.base_model.fields import record_from
from tools.base_model.local import read_folder
from tools.base_model.model import ModelFiles, Refused

DESCRIPTION = "Write config/models/<name>.yaml, a base model's facts, from a hub id, a local folder or s3:// URI."
HUB_ID = re.compile(r"[\w.-]+/[\w.-]+")


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m tools.base_model", description=DESCRIPTION)
    parser.add_argument("model", help="a hub id (org/name), a local model folder or s3://bucket/prefix/")
    parser.add_argument("--hub-id", help="what a folder or s3 copy is a copy of (default: its folder's name)")
    parser.add_argument("--revision", help="hub: the branch, tag or commit to read; a copy: the commit it was taken at")
    parser.add_argument("--gated", action="store_true", help="a copy of a gated hub model (the hub says it itself)")
    parser.add_argument("--upload", metavar="ENV", help="copy the files into ENV's artifact bucket (base-models/)")
    parser.add_argument("--output", type=Path, default=ROOT / "config" / "models", help="default: config/models")
    parser.add_argument("--force", action="store_true", help="replace a record whose facts differ")
    parser.add_argument("--config-dir", type=Path, default=ROOT / "config", help="where --upload's <ENV>.yaml is")
    parser.add_argument("--profile", help="AWS profile (s3:// reads and --upload)")
    parser.add_argument("--region", help="default: the environment's region, else the AWS configuration's")
    parser.add_argument("--endpoint-url", help="the emulator's URL (make deploy KEEP=1); default: AWS")
    return parser


def _session(args: argparse.Namespace):
    import boto3

    return boto3.Session(profile_name=args.profile, region_name=args.region)


def read(args: argparse.Namespace) -> tuple[ModelFiles, str]:
    """What MODEL names, read, and the hub id the record is for."""
    model = args.model
    if model.startswith("s3://"):
        from tools.base_model.s3 import read_s3

        files = read_s3(_session(args), model, endpoint_url=args.endpoint_url, revision=args.revision, gated=args.gated)
        return files, args.hub_id or model.rstrip("/").rsplit("/", 1)[-1]
    if Path(model).is_dir():
        folder = Path(model).resolve()
        files = read_folder(folder, relative(folder), revision=args.revision, gated=args.gated)
        return files, args.hub_id or folder.name
    if not HUB_ID.fullmatch(model) or model.startswith("."):
        raise Refused(f"{model}: no such folder, and not a hub id (org/name) or s3:// URI")
    if args.gated or args.hub_id:
        raise Refused(f"{model}: --gated and --hub-id describe a copy; the hub says what {model} is")
    from tools.base_model.hub import read_hub

    return read_hub(model, args.revision), model


def serving_line(record: BaseModelRecord) -> str:
    """Which serving backends load the architecture (not a refusal here: the synth and profile decide)."""
    loading = [name for name, backend in backends().items() if record.model_type in backend.architectures]
    if loading:
        return f"serving: model_type {record.model_type} is loaded by serving.backend {', '.join(loading)}"
    known = "; ".join(f"{name}: {', '.join(b.architectures)}" for name, b in backends().items())
    return f"serving: no serving.backend loads model_type {record.model_type} ({known}); the synth will refuse it"


def _summary(record: BaseModelRecord, done: Written) -> str:
    facts = (
        f"{record.hub_id}: {record.model_type} {record.architecture}, {record.parameters:,} parameters, "
        f"{record.dtype}, context {record.context_length}{', gated' if record.gated else ''}"
    )
    changed = f": {'; '.join(done.changes)}" if done.changes else ""
    return f"{relative(done.path)}: {done.state} ({facts}){changed}"


def run(args: argparse.Namespace) -> list[str]:
    """Read, check, then write: every refusal comes before the record, the bucket or the config changes."""
    files, hub_id = read(args)
    try:
        record = record_from(files, hub_id)
    except ConfigError as err:
        raise Refused(f"{err}; nothing written") from None
    planned = plan(record, args.output, force=args.force, shown=relative(args.output))
    to = source = None
    if args.upload:
        from tools.base_model.upload import source_folder, target

        to = target(args.upload, args.config_dir, args.profile, args.region, args.endpoint_url)
        source = source_folder(record, args.model)
    write(record, planned)
    lines = [_summary(record, planned), serving_line(record)]
    if to is not None and source is not None:
        from tools.base_model.upload import BASE_MODEL_KEY, MODEL_ID, upload

        sent = upload(record, source, to, args.config_dir)
        lines.append(f"uploaded {sent.objects} objects to {sent.prefix} (SSE-KMS, {to.data.key_arn})")
        removed = f"; {MODEL_ID} {sent.removed_model_id} removed" if sent.removed_model_id else ""
        state = "set" if sent.config_changed else "unchanged"
        lines.append(f"{relative(args.config_dir / f'{args.upload}.yaml')}: {BASE_MODEL_KEY} {state}{removed}")
    return lines


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    from botocore.exceptions import BotoCoreError, ClientError
    from huggingface_hub.errors import HfHubHTTPError

    try:
        lines = run(args)
    except Refused as err:
        print(f"base_model: refused: {err}", file=sys.stderr)
        return 2
    except (ClientError, BotoCoreError, HfHubHTTPError, OSError) as err:
        print(f"base_model: error: {' '.join(str(err).split())}", file=sys.stderr)
        return 1
    print("\n".join(lines))
    return 0
