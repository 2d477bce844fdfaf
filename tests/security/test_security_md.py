"""SECURITY.md lists exactly the findings the code suppresses."""

from __future__ import annotations

from tools.security_findings import SECURITY_MD, embedded, render


def test_findings_block_is_current():
    assert embedded(SECURITY_MD.read_text()) == render(), "run: python tools/security_findings.py --write"


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
