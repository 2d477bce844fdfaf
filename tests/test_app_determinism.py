"""Two synths of the real entry point into two folders give byte-identical templates and assets."""

from __future__ import annotations

import filecmp
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.synth import ROOT, cli_context


def _start_synth(outdir: Path, env_name: str) -> subprocess.Popen:
    env = dict(os.environ)
    env.update({
        "CDK_OUTDIR": str(outdir),
        "CDK_CONTEXT_JSON": json.dumps({**cli_context(), "env": env_name}),
        "JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION": "20",
    })
    return subprocess.Popen([sys.executable, "app.py"], cwd=ROOT, env=env, stderr=subprocess.PIPE, text=True)


def _tree(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.mark.parametrize("env_name", ["dev", "prod"])
def test_two_synths_are_byte_identical(tmp_path, env_name):
    first, second = tmp_path / "a", tmp_path / "b"
    procs = [_start_synth(first, env_name), _start_synth(second, env_name)]
    for proc in procs:
        _, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, err
    a, b = _tree(first), _tree(second)
    assert sorted(a) == sorted(b)
    assert any(name.endswith(".template.json") for name in a)
    differing = [name for name in a if a[name] != b[name]]
    assert differing == [], f"non-deterministic synth output: {differing}"
    assert not filecmp.dircmp(first, second).diff_files
