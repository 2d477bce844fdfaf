"""The command line: synthesize or read both sides, review, print the markdown (and write it whole or not at all)."""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

from tools.review_diff.assembly import read_assembly
from tools.review_diff.markdown import render
from tools.review_diff.model import ReviewError
from tools.review_diff.summary import review
from tools.review_diff.synth import synth_tree
from tools.review_diff.worktree import synth_ref

ROOT = Path(__file__).resolve().parents[2]
DESCRIPTION = "Review summary of an infrastructure change: what a merge would add, change, replace or delete in AWS."


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m tools.review_diff", description=DESCRIPTION)
    side = parser.add_mutually_exclusive_group(required=True)
    side.add_argument("--base", metavar="REF", help="git ref to compare against, e.g. origin/main")
    side.add_argument("--base-dir", type=Path, help="a synthesized cloud assembly (or a folder of them)")
    parser.add_argument("--head-dir", type=Path, help="a synthesized cloud assembly; default: synthesize the tree")
    parser.add_argument("--env", action="append", help="environment(s) to synthesize; default: every config/*.yaml")
    parser.add_argument("--output", type=Path, help="write the markdown here too (it always goes to stdout)")
    parser.add_argument("--max-chars", type=int, default=60000, help="0: no limit; default fits a PR comment")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    envs = args.env or sorted(p.stem for p in (ROOT / "config").glob("*.yaml"))
    if args.output:
        args.output.unlink(missing_ok=True)  # a failed run leaves no review of an earlier one behind
    try:
        markdown = _run(args, envs)
    except ReviewError as err:
        print(f"review error: {err}", file=sys.stderr)
        return 2
    sys.stdout.write(markdown)
    if args.output:
        partial = args.output.with_name(args.output.name + ".partial")
        partial.write_text(markdown, encoding="utf-8")
        os.replace(partial, args.output)  # whole or absent, never half written
    return 0


def _run(args: argparse.Namespace, envs: list[str]) -> str:
    with tempfile.TemporaryDirectory(prefix="review-") as tmp:
        workdir = Path(tmp)
        if args.base:
            base_dir = synth_ref(args.base, workdir, envs)
            title = f"`{args.base}` -> working tree"
        else:
            base_dir = args.base_dir
            title = f"`{args.base_dir.as_posix()}` -> `{(args.head_dir or Path('working tree')).as_posix()}`"
        base = read_assembly(base_dir) if base_dir.exists() else {}
        if args.head_dir is None:
            synth_tree(ROOT, workdir / "head", envs)
            head_dir = workdir / "head"
        else:
            head_dir = args.head_dir
        head = read_assembly(head_dir)
        return render(review(base, head, title), max_chars=args.max_chars)
