"""checkov on every synthesized template: no failed check except the skips in security/checkov-skips.yaml."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
import yaml

from tests.synth import ROOT

pytestmark = pytest.mark.slow

CHECKOV = ROOT / ".venv-checkov" / "bin" / "checkov"
SKIPS = yaml.safe_load((ROOT / "security" / "checkov-skips.yaml").read_text())


def _unit(file_path: str) -> str:
    """llm-inf2-dev-Serving.template.json -> Serving."""
    return Path(file_path).name.removesuffix(".template.json").rsplit("-", 1)[-1]


@pytest.fixture(scope="module")
def checkov_results(assemblies):
    if not CHECKOV.exists():
        pytest.fail(f"{CHECKOV} missing: run `make test` (it installs requirements-checkov.txt into .venv-checkov)")
    results = {}
    env = {**os.environ, "BC_SKIP_MAPPING": "TRUE", "CHECKOV_RUN_SCA_PACKAGE_SCAN_V2": "false"}
    for name, assembly in assemblies.items():
        proc = subprocess.run(
            [
                str(CHECKOV),
                "-d",
                assembly.directory,
                "--framework",
                "cloudformation",
                "--skip-download",
                "--compact",
                "--quiet",
                "-o",
                "json",
            ],
            capture_output=True,
            text=True,
            env=env,
            timeout=600,
            check=False,
        )
        report, _ = json.JSONDecoder().raw_decode(proc.stdout)
        results[name] = report if isinstance(report, dict) else {"results": {"failed_checks": []}, "summary": {}}
    return results


def _is_skipped(env_name: str, failed: dict) -> dict | None:
    logical_id = failed["resource"].split(".", 1)[1]
    for entry in SKIPS:
        if (
            entry["check"] == failed["check_id"]
            and entry["unit"] == _unit(failed["file_path"])
            and logical_id.startswith(entry["resource"])
            and env_name in entry.get("envs", [env_name])
        ):
            return entry
    return None


def test_every_template_was_scanned(checkov_results, assemblies):
    for env_name, report in checkov_results.items():
        assert report["summary"]["parsing_errors"] == 0
        assert report["summary"]["passed"] > 50
        assert (
            report["summary"]["resource_count"]
            >= sum(len(stack.template.get("Resources", {})) for stack in assemblies[env_name].stacks) - 5
        )  # checkov ignores AWS::CDK::Metadata-like entries only


def test_no_failed_check_outside_the_skip_file(checkov_results):
    unexpected = [
        f"{env}: {f['check_id']} {f['resource']} ({f['check_name']})"
        for env, report in checkov_results.items()
        for f in report["results"]["failed_checks"]
        if _is_skipped(env, f) is None
    ]
    assert unexpected == []


def test_every_skip_is_used_and_explained(checkov_results):
    used = {
        id(entry)
        for env, report in checkov_results.items()
        for f in report["results"]["failed_checks"]
        if (entry := _is_skipped(env, f)) is not None
    }
    for entry in SKIPS:
        assert len(entry["reason"]) >= 60, entry
        assert id(entry) in used, f"stale checkov skip: {entry['check']} on {entry['unit']}/{entry['resource']}"
