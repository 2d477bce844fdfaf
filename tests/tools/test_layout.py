"""A command that outgrows one file becomes a package that still starts as a command."""

from __future__ import annotations

import subprocess
import sys

from tests.synth import ROOT


def test_every_tools_package_runs_as_a_module():
    """`python -m tools.<name>` is how a package command starts (Makefile, docs, workflows)."""
    for name in ("review_diff", "cost", "promote_model", "base_model", "eval_data", "profile"):
        done = subprocess.run(
            [sys.executable, "-m", f"tools.{name}", "--help"], cwd=ROOT, capture_output=True, text=True, timeout=60
        )
        assert done.returncode == 0 and f"usage: python -m tools.{name}" in done.stdout, (name, done.stderr)
