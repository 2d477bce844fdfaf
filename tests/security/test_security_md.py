"""SECURITY.md lists exactly the findings the code suppresses."""

from __future__ import annotations

from pathlib import Path

from stacks.config import load_config
from tests.synth import ROOT
from tools.security_findings import SECURITY_MD, embedded, render


def test_findings_block_is_current(assemblies):
    folders = {env: Path(assembly.directory) for env, assembly in assemblies.items()}
    configs = {env: load_config(env, ROOT / "config") for env in folders}
    prefixes = {env: f"{c.app_name}-{c.env_name}" for env, c in configs.items()}
    assert embedded(SECURITY_MD.read_text()) == render(folders, prefixes), (
        "run: python tools/security_findings.py --write"
    )


def test_threat_model_sections_present():
    text = SECURITY_MD.read_text()
    for heading in (
        "**Assets.**",
        "**Trust boundaries.**",
        "**Who can invoke the endpoint.**",
        "**Who can read the bucket.**",
        "**What each role may do.**",
        "## Reporting a vulnerability",
    ):
        assert heading in text
