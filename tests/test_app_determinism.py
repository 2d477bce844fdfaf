"""Two synths into two folders give byte-identical templates and assets.

One side is the session's in-process synth (the shared fixture), the other the real entry point
(`python app.py` as the CDK CLI runs it) in a separate process, so the check also proves that the
tests synthesize exactly what `make synth` does.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.synth import ROOT, cli_context

pytestmark = pytest.mark.slow


def _synth_process(outdir: Path, env_name: str) -> subprocess.CompletedProcess:
    env = dict(os.environ)
    env.update(
        {
            "CDK_OUTDIR": str(outdir),
            "CDK_CONTEXT_JSON": json.dumps({**cli_context(), "env": env_name}),
        }
    )
    return subprocess.run(
        [sys.executable, "app.py"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=600, check=False
    )


def _tree(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.mark.parametrize("env_name", ["dev", "prod"])
def test_two_synths_are_byte_identical(shipped_assemblies, tmp_path, env_name):
    result = _synth_process(tmp_path, env_name)
    assert result.returncode == 0, result.stderr
    in_process, entry_point = _tree(Path(shipped_assemblies[env_name].directory)), _tree(tmp_path)
    assert sorted(in_process) == sorted(entry_point)
    assert any(name.endswith(".template.json") for name in entry_point)
    assert any(name.startswith("asset.") for name in entry_point), "asset files are compared too"
    differing = [name for name in entry_point if in_process[name] != entry_point[name]]
    assert differing == [], f"non-deterministic synth output: {differing}"
