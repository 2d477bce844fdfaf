"""Offline synthesis of a source tree, one `python app.py` per environment, as `npx cdk synth` runs it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from tools.review_diff.model import ReviewError


def _context(tree: Path, env_name: str) -> dict[str, Any]:
    """What `npx cdk synth -c env=NAME` hands app.py: cdk.json context plus the CLI's metadata switches."""
    cdk_json = json.loads((tree / "cdk.json").read_text(encoding="utf-8"))
    return {
        **cdk_json.get("context", {}),
        "aws:cdk:enable-path-metadata": cdk_json.get("pathMetadata", True),
        "aws:cdk:enable-asset-metadata": True,
        "aws:cdk:version-reporting": cdk_json.get("versionReporting", True),
        "env": env_name,
    }


def _start(tree: Path, outdir: Path, env_name: str) -> subprocess.Popen:
    """One app.py process for one environment; every environment synthesizes at once."""
    environ = dict(os.environ)
    environ.update(
        {
            "CDK_OUTDIR": str(outdir / env_name),
            "CDK_CONTEXT_JSON": json.dumps(_context(tree, env_name)),
            "PYTHONDONTWRITEBYTECODE": "1",
        }
    )
    return subprocess.Popen(
        [sys.executable, "app.py"], cwd=tree, env=environ, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


def synth_tree(tree: Path, outdir: Path, envs: list[str]) -> dict[str, str]:
    """Synthesize every env of the source tree `tree` into outdir/<env>; returns {env: why it was skipped}."""
    procs = {env_name: _start(tree, outdir, env_name) for env_name in envs}
    skipped = {}
    for env_name, proc in procs.items():
        _, err = proc.communicate(timeout=900)
        if proc.returncode == 0:
            continue
        last = (err.strip().splitlines() or ["(no output)"])[-1]
        if "no such file for env" in last:  # the environment does not exist on this side: nothing deployed
            skipped[env_name] = "no config file"
            continue
        raise ReviewError(f"synth of {tree.name} env {env_name} failed: {last}")
    return skipped
