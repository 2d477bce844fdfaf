"""tools/ stays readable in one sitting: no file over 400 lines, and a package per command that outgrows one file."""

from __future__ import annotations

import subprocess
import sys

from tests.synth import ROOT

MAX_LINES = 400


def _tracked(folder: str) -> list[str]:
    listed = subprocess.run(["git", "ls-files", folder], cwd=ROOT, capture_output=True, text=True, check=True)
    return [path for path in listed.stdout.split() if (ROOT / path).is_file()]


def test_no_file_in_tools_is_over_400_lines():
    sizes = {path: len((ROOT / path).read_text(encoding="utf-8").splitlines()) for path in _tracked("tools")}
    too_long = {path: lines for path, lines in sizes.items() if lines > MAX_LINES}
    assert sizes and too_long == {}, f"split these by concern (at most {MAX_LINES} lines each): {too_long}"


def test_every_tools_package_runs_as_a_module():
    """`python -m tools.<name>` is how a package command starts (Makefile, docs, workflows)."""
    for name in ("review_diff", "cost", "promote_model"):
        done = subprocess.run(
            [sys.executable, "-m", f"tools.{name}", "--help"], cwd=ROOT, capture_output=True, text=True, timeout=60
        )
        assert done.returncode == 0 and f"usage: python -m tools.{name}" in done.stdout, (name, done.stderr)
