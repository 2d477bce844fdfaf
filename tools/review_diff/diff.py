"""The diff engine: @aws-cdk/cloudformation-diff (tools/cfn_diff.cjs), the engine of `cdk diff --template`."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

from local.cloud_assembly import StackArtifact
from tools.review_diff.model import ReviewError

ROOT = Path(__file__).resolve().parents[2]


def _request(base: dict[str, StackArtifact], head: dict[str, StackArtifact]) -> dict[str, Any]:
    """Every stack of either side: its two template files and the construct paths of its logical ids."""
    return {
        "stacks": [
            {
                "name": name,
                "base": str(base[name].template_file) if name in base else None,
                "head": str(head[name].template_file) if name in head else None,
                "paths": {**(base[name].paths if name in base else {}), **(head[name].paths if name in head else {})},
            }
            for name in sorted(set(base) | set(head))
        ]
    }


def run_engine(base: dict[str, StackArtifact], head: dict[str, StackArtifact]) -> dict[str, Any]:
    """The engine's per-stack diff: resources with their change impact, IAM and security-group tables, text."""
    proc = subprocess.run(
        ["node", str(ROOT / "tools" / "cfn_diff.cjs")],
        input=json.dumps(_request(base, head)),
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**os.environ, "FORCE_COLOR": "0"},
    )
    if proc.returncode != 0:
        raise ReviewError(f"cloudformation-diff failed: {(proc.stderr.strip().splitlines() or ['?'])[-1]}")
    return json.loads(proc.stdout)
