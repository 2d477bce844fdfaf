"""cdk.json sets the feature flags a new `cdk init` app gets for the installed aws-cdk-lib, but two kept apart.

The recommended values come from aws-cdk-lib's own recommended-feature-flags.json (inside its jsii bundle), what
`cdk init` writes; the CLI reads each synthesized assembly's feature-flag report and counts the flags left
unconfigured. The two kept values, and why, are in docs/configuration.md (CDK feature flags).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import tarfile
from pathlib import Path

import aws_cdk

from tests.synth import ROOT

KEPT = {
    # weak references (Fn::GetStackOutput) would replace every Export/ImportValue pair the deployed stacks use
    "@aws-cdk/core:defaultCrossStackReferences": "strong",
    # the stacks' own tags (app, environment, cost-center, owner) would no longer be stack tags at deploy
    "@aws-cdk/core:explicitStackTags": False,
}


def _recommended() -> dict:
    [bundle] = (Path(aws_cdk.__file__).parent / "_jsii").glob("aws-cdk-lib@*.jsii.tgz")
    with tarfile.open(bundle) as tar:
        return json.load(tar.extractfile("package/recommended-feature-flags.json"))


def test_cdk_json_sets_every_recommended_flag_but_the_two_kept_apart():
    context = json.loads((ROOT / "cdk.json").read_text())["context"]
    recommended = _recommended()
    assert len(recommended) > 80
    differing = {
        flag: context.get(flag, "<unset>") for flag, value in recommended.items() if context.get(flag) != value
    }
    assert differing == KEPT
    assert all(recommended[flag] != kept for flag, kept in KEPT.items())  # kept apart from a different value
    docs = (ROOT / "docs" / "configuration.md").read_text()
    assert all(f"`{flag}`" in docs for flag in KEPT)


def _cli_synth(assembly: Path) -> str:
    proc = subprocess.run(
        ["npx", "--no-install", "cdk", "synth", "--quiet", "--app", str(assembly)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc.stdout + proc.stderr


def test_the_cli_finds_no_unconfigured_feature_flag(shipped_assemblies, tmp_path):
    shipped = Path(shipped_assemblies["dev"].directory)
    assert "feature flags are not configured" not in _cli_synth(shipped)
    # the control: the same assembly with every flag's configured value taken out of its report
    bare = tmp_path / "bare"
    shutil.copytree(shipped, bare)
    manifest = json.loads((bare / "manifest.json").read_text())
    report = manifest["artifacts"]["aws-cdk-lib/feature-flag-report"]["properties"]["flags"]
    for flag in report.values():
        flag.pop("userValue", None)
    (bare / "manifest.json").write_text(json.dumps(manifest))
    assert "feature flags are not configured" in _cli_synth(bare)
