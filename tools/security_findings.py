#!/usr/bin/env python3
"""Render every accepted scanner finding (cdk-nag and Control Tower acknowledgments, checkov skips) as markdown.

The acknowledgments are made beside their resources (stacks/shared/acknowledgments.py) and recorded in each
synthesized stack's metadata; this reads them from every environment as the test suite synthesizes it (serving
on), the environment's `<app>-<env>` written as `<prefix>`. SECURITY.md embeds the output between markers;
`--write` refreshes it and the tests fail when it is stale, so the document and the code cannot drift apart.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from collections.abc import Mapping
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

BEGIN, END = "<!-- findings:begin (tools/security_findings.py --write) -->", "<!-- findings:end -->"
SECURITY_MD = ROOT / "SECURITY.md"


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


ACKNOWLEDGED_RULES = "aws:cdk:acknowledged-rules"  # aws-cdk's Validations.ACKNOWLEDGED_RULES_METADATA_KEY


def acknowledgments(assembly_dir: Path) -> list[tuple[str, str, str, str]]:
    """(stack name, construct path inside it, rule, reason) of every acknowledgment in a cloud assembly."""
    found = []
    for metadata in sorted(Path(assembly_dir).glob("*.metadata.json")):
        for path, entries in json.loads(metadata.read_text()).items():
            stack, _, inside = path.lstrip("/").partition("/")
            for entry in entries:
                if entry["type"] == ACKNOWLEDGED_RULES:
                    found += [
                        (stack, inside, rule.removeprefix("Annotation::"), why) for rule, why in entry["data"].items()
                    ]
    return found


def _rows(assembly_dirs: Mapping[str, Path], prefixes: Mapping[str, str]) -> dict[tuple[str, str, str, str], list]:
    """{(unit, path, rule, reason): environments}, one row per acknowledgment whatever the environment."""
    rows: dict[tuple[str, str, str, str], list] = {}
    for env, folder in assembly_dirs.items():
        for stack, path, rule, reason in acknowledgments(folder):
            unit = stack.removeprefix(f"{prefixes[env]}-")
            rows.setdefault((unit, path, rule.replace(prefixes[env], "<prefix>"), reason), []).append(env)
    return dict(sorted(rows.items()))


def _envs(envs: list[str], every: list[str]) -> str:
    return "all" if envs == every else ", ".join(envs)


def render(assembly_dirs: Mapping[str, Path], prefixes: Mapping[str, str]) -> str:
    """`assembly_dirs`: {env: synthesized folder}; `prefixes`: {env: its `<app>-<env>`}."""
    skips = yaml.safe_load((ROOT / "security" / "checkov-skips.yaml").read_text())
    rows = _rows(assembly_dirs, prefixes)
    every = list(assembly_dirs)
    lines = [
        f"### cdk-nag and Control Tower acknowledgments ({len(rows)}, made beside their resources)",
        "",
        "| stack | resource | rule | environments | reason |",
        "| --- | --- | --- | --- | --- |",
        *(
            f"| {unit} | `{path or '(stack)'}` | `{_cell(rule)}` | {_envs(envs, every)} | {_cell(reason)} |"
            for (unit, path, rule, reason), envs in rows.items()
        ),
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


def synthesized(out: Path) -> tuple[dict[str, Path], dict[str, str]]:
    """Every environment as the test suite synthesizes it (tests/synth.py: serving on), into `out`."""
    from stacks.config import load_config
    from tests.conftest import ENVIRONMENTS
    from tests.synth import synth_served

    folders = {env: Path(synth_served(env, out / env).directory) for env in ENVIRONMENTS}
    configs = {env: load_config(env, ROOT / "config") for env in folders}
    return folders, {env: f"{c.app_name}-{c.env_name}" for env, c in configs.items()}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true", help="refresh the block in SECURITY.md")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as out:
        block = render(*synthesized(Path(out)))
    if not args.write:
        print(block)
        return 0
    text = SECURITY_MD.read_text()
    head, rest = text.split(BEGIN, 1)
    SECURITY_MD.write_text(f"{head}{BEGIN}\n{block}\n{END}{rest.split(END, 1)[1]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
