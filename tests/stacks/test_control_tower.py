"""AWS Control Tower proactive controls (cfn-guard plugin) on every synth: nothing unacknowledged, nothing stale.

The plugin runs beside cdk-nag (stacks/nag.py); synth itself fails on an unacknowledged finding, so the
fixture's synth is the first check. Each acknowledgment must suppress a real finding in dev or prod.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tools.security_findings import acknowledgments

GUARD = "cdk-validator-cfnguard::"


def _guard_report(assembly) -> dict:
    report = json.loads((Path(assembly.directory) / "validation-report.json").read_text())
    [guard] = [p for p in report["pluginReports"] if p["pluginName"] == "cdk-validator-cfnguard"]
    return guard


def _suppressed(assembly) -> set[tuple[str, str, str]]:
    """(unit, construct path inside the stack, rule name) of every acknowledged finding."""
    found = set()
    for violation in _guard_report(assembly)["suppressedViolations"]:
        for construct in violation["violatingConstructs"]:
            stack, _, path = construct["constructPath"].partition("/")
            found.add((stack.rsplit("-", 1)[-1], path.removesuffix("/Resource"), violation["ruleName"]))
    return found


def test_no_unacknowledged_control_tower_finding(assemblies):
    for env_name, assembly in assemblies.items():
        guard = _guard_report(assembly)
        assert guard["conclusion"] == "success" and guard["violations"] == [], env_name


def test_every_control_tower_acknowledgment_suppresses_a_finding(assemblies):
    seen = set().union(*(_suppressed(assembly) for assembly in assemblies.values()))
    entries = {
        (stack.rsplit("-", 1)[-1], path, rule.removeprefix(GUARD))
        for assembly in assemblies.values()
        for stack, path, rule, _ in acknowledgments(Path(assembly.directory))
        if rule.startswith(GUARD)
    }
    assert len(entries) == 10
    assert sorted(entries - seen) == []


def test_the_data_key_limits_grants_to_aws_resources(templates):
    """CT.KMS.PR.3 fixed, not acknowledged: a deny on CreateGrant unless for an AWS resource or by a service."""
    for env_name in ("dev", "prod"):
        [key] = [r for r in templates[env_name]["Data"]["Resources"].values() if r["Type"] == "AWS::KMS::Key"]
        [deny] = [s for s in key["Properties"]["KeyPolicy"]["Statement"] if s.get("Sid") == "GrantsOnlyForAwsResources"]
        assert deny["Effect"] == "Deny" and deny["Action"] == "kms:CreateGrant"
        assert deny["Condition"] == {
            "BoolIfExists": {"kms:GrantIsForAWSResource": "false", "aws:PrincipalIsAWSService": "false"}
        }


def test_the_narrowed_rules_keep_every_rule_for_a_present_type_and_drop_only_absent_ones(tmp_path):
    """Control Tower's CT.S3.PR.2 (ct-s3-pr-2: server access logging) checks AWS::S3::Bucket; an RDS rule
    (ct-rds-pr-*) cannot match a template that has no database."""
    from stacks.control_tower import inapplicable_rules, rule_types

    template = tmp_path / "t.template.json"
    template.write_text(json.dumps({"Resources": {"B": {"Type": "AWS::S3::Bucket", "Properties": {}}}}))
    skipped = set(inapplicable_rules([str(template)]))
    assert "AWS::S3::Bucket" in rule_types()["ct-s3-pr-2"] and "ct-s3-pr-2" not in skipped
    assert {name for name in rule_types() if name.startswith("ct-rds-pr-")} <= skipped
    assert all("AWS::S3::Bucket" not in rule_types()[name] for name in skipped)


def test_the_narrowed_plugin_still_fails_the_synth_on_a_finding(tmp_path):
    from aws_cdk import App, Stack, Validations
    from aws_cdk import aws_s3 as s3

    from stacks.control_tower import ControlTowerChecks

    app = App(outdir=str(tmp_path / "out"))
    s3.CfnBucket(Stack(app, "Bare"), "Bucket")  # no logging, no KMS encryption
    Validations.of(app).add_plugins(ControlTowerChecks())
    with pytest.raises(Exception, match="s3_bucket_logging_enabled_check"):
        app.synth()


def test_a_rule_that_names_no_resource_type_stops_the_narrowing(tmp_path, monkeypatch):
    """A rule with no type could match anything: the plugin refuses to narrow, with one line naming the package."""
    import io
    import tarfile

    from stacks import control_tower

    tarball = tmp_path / "plugin.jsii.tgz"
    with tarfile.open(tarball, "w:gz") as tar:
        for name, text in (("ct-s3-pr-2", "let b = Resources.*[ Type == 'AWS::S3::Bucket' ]"), ("ct-any", "rule x {}")):
            data = text.encode()
            member = tarfile.TarInfo(f"{control_tower._RULES}{name}.guard")
            member.size = len(data)
            tar.addfile(member, io.BytesIO(data))
    monkeypatch.setattr(control_tower, "_package_tarball", lambda: tarball)
    with pytest.raises(LookupError, match=r"^cfn-guard rules without a resource type in .*plugin\.jsii\.tgz; cannot"):
        control_tower.rule_types.__wrapped__()
