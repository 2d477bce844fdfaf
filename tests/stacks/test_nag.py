"""cdk-nag (AwsSolutions, HIPAA, NIST 800-53 R5) finds nothing unacknowledged in any environment."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from stacks import nag
from tests.conftest import ENVIRONMENTS


@pytest.mark.parametrize("env", ENVIRONMENTS)
def test_no_unacknowledged_findings(assemblies, env):
    # app.synth() raises on a finding, so reaching here already means none; the report must agree.
    report = json.loads((Path(assemblies[env].directory) / "validation-report.json").read_text())
    violations = [v for plugin in report["pluginReports"] for v in plugin.get("violations", [])]
    assert violations == []


def test_all_three_packs_run():
    names = {pack.__name__ for pack in nag.RULE_PACKS}
    assert names == {"AwsSolutionsChecks", "HIPAASecurityChecks", "NIST80053R5Checks"}


def test_acknowledgments_are_narrow_and_explained():
    seen = set()
    for entry in nag.ACKNOWLEDGED:
        # A finding detail may quote a wildcard resource ("AwsSolutions-IAM5[Resource::.../datasets/*]"); the rule
        # id itself and the construct path may not be patterns.
        assert "*" not in entry.rule.split("[", 1)[0] and "*" not in entry.path, entry
        assert len(entry.reason) >= 40, f"{entry.rule} on {entry.path}: give a reviewer a real reason"
        key = (entry.unit, entry.path, entry.rule)
        assert key not in seen, f"duplicate acknowledgment {key}"
        seen.add(key)


def test_a_stale_acknowledgment_fails_the_synth(monkeypatch):
    from aws_cdk import App

    from stacks.config import load_config
    from tests.synth import ROOT, cli_context

    stale = nag.Acknowledged("Data", "NoSuchBucket", "AwsSolutions-S1", "x" * 40)
    monkeypatch.setattr(nag, "ACKNOWLEDGED", (*nag.ACKNOWLEDGED, stale))
    from stacks.application import build_app

    with pytest.raises(LookupError, match="NoSuchBucket"):
        build_app(App(context=cli_context()), load_config("dev", ROOT / "config"))


@pytest.mark.parametrize("env", ENVIRONMENTS)
def test_a_pinned_account_and_region_keep_the_acknowledgments_matching(tmp_path, env):
    """With `account`/`region` set, findings print them literally instead of `<AWS::Region>`; still clean."""
    import shutil

    import yaml

    from stacks.config import load_config
    from tests.synth import ROOT, served, synth

    settings = yaml.safe_load((ROOT / "config" / f"{env}.yaml").read_text())
    settings.update(account="123456789012", region="eu-west-1")
    # the whole folder: an environment may name another (staging rehearses prod)
    shutil.copytree(ROOT / "config", tmp_path / "config")
    (tmp_path / "config" / f"{env}.yaml").write_text(yaml.safe_dump(settings))
    # served: every stack; raises on an unacknowledged finding
    assembly = synth(served(load_config(env, tmp_path / "config")), tmp_path / "out")
    report = json.loads((Path(assembly.directory) / "validation-report.json").read_text())
    assert [v for plugin in report["pluginReports"] for v in plugin.get("violations", [])] == []
    assert {(stack.environment.account, stack.environment.region) for stack in assembly.stacks} == {
        ("123456789012", "eu-west-1")
    }
