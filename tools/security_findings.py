#!/usr/bin/env python3
"""Render every accepted scanner finding (cdk-nag acknowledgments, checkov skips) as markdown.

SECURITY.md embeds this output between markers; `--write` refreshes it and the tests fail when it
is stale, so the document and the code that suppresses findings cannot drift apart.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

BEGIN, END = "<!-- findings:begin (tools/security_findings.py --write) -->", "<!-- findings:end -->"
SECURITY_MD = ROOT / "SECURITY.md"


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def render() -> str:
    from stacks.nag import ACKNOWLEDGED

    skips = yaml.safe_load((ROOT / "security" / "checkov-skips.yaml").read_text())
    lines = [
        f"### cdk-nag acknowledgments ({len(ACKNOWLEDGED)}, from `stacks/nag.py`)",
        "",
        "| stack | resource | rule | reason |",
        "| --- | --- | --- | --- |",
        *(f"| {a.unit} | `{a.path}` | `{_cell(a.rule)}` | {_cell(a.reason)} |" for a in ACKNOWLEDGED),
        "",
        f"### checkov skips ({len(skips)}, from `security/checkov-skips.yaml`)",
        "",
        "| stack | resource | check | environments | reason |",
        "| --- | --- | --- | --- | --- |",
        *(
            f"| {s['unit']} | `{s['resource']}` | `{s['check']}` | {', '.join(s.get('envs', ['all']))} | "
            f"{_cell(s['reason'])} |"
            for s in skips
        ),
    ]
    return "\n".join(lines)


def embedded(text: str) -> str:
    return text.split(BEGIN, 1)[1].split(END, 1)[0].strip("\n")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true", help="refresh the block in SECURITY.md")
    args = parser.parse_args()
    block = render()
    if not args.write:
        print(block)
        return 0
    text = SECURITY_MD.read_text()
    head, rest = text.split(BEGIN, 1)
    SECURITY_MD.write_text(f"{head}{BEGIN}\n{block}\n{END}{rest.split(END, 1)[1]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
