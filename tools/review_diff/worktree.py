"""The base side of `--base REF`: the ref checked out beside the working tree and synthesized there."""

from __future__ import annotations

import subprocess
from pathlib import Path

from tools.review_diff.model import ReviewError
from tools.review_diff.synth import synth_tree

ROOT = Path(__file__).resolve().parents[2]


def synth_ref(ref: str, workdir: Path, envs: list[str]) -> Path:
    """Check `ref` out into a temporary worktree, synthesize it into workdir/base, remove the worktree."""
    tree = workdir / "base-src"
    proc = subprocess.run(
        ["git", "worktree", "add", "--detach", "--quiet", str(tree), ref], cwd=ROOT, capture_output=True, text=True
    )
    if proc.returncode != 0:
        raise ReviewError(f"git worktree add {ref}: {(proc.stderr.strip().splitlines() or ['failed'])[-1]}")
    try:
        synth_tree(tree, workdir / "base", envs)
    finally:
        subprocess.run(["git", "worktree", "remove", "--force", str(tree)], cwd=ROOT, capture_output=True)
    return workdir / "base"
