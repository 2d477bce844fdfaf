"""The command line: exit 0 staged, 2 refused (one line, nothing staged), 1 an error the checks did not foresee
(the hub or AWS unreachable; one line)."""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

from stacks.paths import ROOT, relative
from tools.eval_data.model import Refused

DESCRIPTION = "Stage an lm-eval task's data as files (<task>.yaml + <split>.jsonl) for the benchmark job."


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m tools.eval_data", description=DESCRIPTION)
    parser.add_argument("task", help="an lm-eval task name, e.g. arc_easy")
    parser.add_argument("--out", type=Path, help="write <out>/<task>/ here (default without --upload: build/eval-data)")
    parser.add_argument("--upload", metavar="ENV", help="put it into ENV's artifact bucket (training.benchmark)")
    parser.add_argument("--source", type=Path, help="a local copy of the dataset's repository instead of the hub")
    parser.add_argument("--revision", help="the dataset's branch, tag or commit (default: its main branch's head)")
    parser.add_argument("--include-path", help="a folder of your own lm-eval task YAMLs, searched too")
    parser.add_argument("--config-dir", type=Path, default=ROOT / "config", help="where --upload's <ENV>.yaml is")
    parser.add_argument("--profile", help="AWS profile (--upload)")
    parser.add_argument("--region", help="default: the environment's region, else the AWS configuration's")
    parser.add_argument("--endpoint-url", help="the emulator's URL (make deploy KEEP=1); default: AWS")
    return parser


def run(args: argparse.Namespace, work: Path) -> list[str]:
    """Find the task, reach the environment, fetch, then write: every refusal comes before anything is staged."""
    from tools.eval_data.fetch import fetch
    from tools.eval_data.task import find_task
    from tools.eval_data.write import write_staged

    task = find_task(args.task, args.include_path)
    to = None
    if args.upload:
        from tools.base_model.model import Refused as NotDeployed
        from tools.base_model.upload import target

        try:
            to = target(args.upload, args.config_dir, args.profile, args.region, args.endpoint_url)
        except NotDeployed as err:
            raise Refused(str(err)) from None
    fetched = fetch(task, source=args.source, revision=args.revision, work=work)
    out = args.out or (work / "staged" if to is not None else ROOT / "build" / "eval-data")
    folder = write_staged(task, fetched, out)
    counts = ", ".join(f"{split} {len(rows)} rows" for split, rows in fetched.rows.items())
    at = f"@{fetched.revision}" if fetched.revision else ""
    lines = [f"{task.name}: {fetched.source}{at} -> {relative(folder)}/ ({counts})"]
    if to is not None:
        from tools.eval_data.upload import upload

        uri, count = upload(folder, to)
        lines.append(f"uploaded {count} objects to {uri} (SSE-KMS, {to.data.key_arn})")
    return lines


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    from botocore.exceptions import BotoCoreError, ClientError
    from huggingface_hub.errors import HfHubHTTPError

    try:
        with tempfile.TemporaryDirectory(prefix="eval-data-") as work:
            lines = run(args, Path(work))
    except Refused as err:
        print(f"eval_data: refused: {err}", file=sys.stderr)
        return 2
    except (ClientError, BotoCoreError, HfHubHTTPError, OSError) as err:
        print(f"eval_data: error: {' '.join(str(err).split())}", file=sys.stderr)
        return 1
    print("\n".join(lines))
    return 0
