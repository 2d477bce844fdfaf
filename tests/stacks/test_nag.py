"""cdk-nag (AwsSolutions, HIPAA, NIST 800-53 R5) finds nothing unacknowledged in any environment."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from aws_cdk import App, Stack, Validations
from aws_cdk import aws_iam as iam
from aws_cdk import aws_s3 as s3
from cdk_nag import AwsSolutionsChecks

from stacks import nag
from stacks.shared.acknowledgments import Wildcard, acknowledge, acknowledge_wildcards
from tests.conftest import ENVIRONMENTS
from tests.stacks.serving.test_backend_registry import _copy_repository
from tools.security_findings import acknowledgments


@pytest.mark.parametrize("env", ENVIRONMENTS)
def test_no_unacknowledged_findings(assemblies, env):
    # app.synth() raises on a finding, so reaching here already means none; the report must agree.
    report = json.loads((Path(assemblies[env].directory) / "validation-report.json").read_text())
    violations = [v for plugin in report["pluginReports"] for v in plugin.get("violations", [])]
    assert violations == []


def test_all_three_packs_run():
    names = {pack.__name__ for pack in nag.RULE_PACKS}
    assert names == {"AwsSolutionsChecks", "HIPAASecurityChecks", "NIST80053R5Checks"}


def test_acknowledgments_are_narrow_and_explained(assemblies):
    for env, assembly in assemblies.items():
        seen = set()
        for stack, path, rule, reason in acknowledgments(Path(assembly.directory)):
            # A finding detail may quote a wildcard resource ("AwsSolutions-IAM5[Resource::.../datasets/*]"); the rule
            # id itself and the construct path may not be patterns.
            assert "*" not in rule.split("[", 1)[0] and "*" not in path, (env, stack, path, rule)
            assert len(reason) >= 40, f"{env} {stack}/{path} {rule}: give a reviewer a real reason"
            assert (stack, path, rule) not in seen, f"{env}: duplicate acknowledgment {stack}/{path} {rule}"
            seen.add((stack, path, rule))


def _policy_stacks() -> tuple[App, Stack, s3.Bucket]:
    """A bucket in one stack, a role policy reaching every object under a prefix of it in another (an import)."""
    app = App()
    data = Stack(app, "Data")
    bucket = s3.Bucket(data, "ArtifactBucket")
    for rule in ("AwsSolutions-S1", "AwsSolutions-S10"):  # the bucket's own findings, not this test's subject
        acknowledge(bucket, rule, "a test bucket: only the policy's wildcard is under test here")
    jobs = Stack(app, "Jobs")
    return app, jobs, bucket


def _policy(jobs: Stack, bucket: s3.Bucket) -> iam.ManagedPolicy:
    return iam.ManagedPolicy(
        jobs,
        "Policy",
        statements=[iam.PolicyStatement(actions=["s3:GetObject"], resources=[bucket.arn_for_objects("datasets/*")])],
    )


def test_a_wildcard_acknowledgment_renders_the_finding_cdk_nag_reports():
    """The rule id is rendered at synth from the statement's tokens (an export name here): the same id cdk-nag
    reports, so the pack passes; without the acknowledgment, it fails."""
    app, jobs, bucket = _policy_stacks()
    acknowledge_wildcards(_policy(jobs, bucket), [Wildcard(bucket.arn_for_objects("datasets/*"), "x" * 40)])
    Validations.of(app).add_plugins(AwsSolutionsChecks(app))
    app.synth()
    app, jobs, bucket = _policy_stacks()
    _policy(jobs, bucket)
    Validations.of(app).add_plugins(AwsSolutionsChecks(app))
    with pytest.raises(Exception, match="AwsSolutions-IAM5"):
        app.synth()


def test_a_wildcard_acknowledgment_the_policy_does_not_grant_fails_the_synth():
    app, jobs, bucket = _policy_stacks()
    acknowledge_wildcards(_policy(jobs, bucket), [Wildcard(bucket.arn_for_objects("models/*"), "x" * 40)])
    with pytest.raises(
        Exception,
        match=r"acknowledged wildcard Data:ExportsOutput\S+/models/\* is not granted by "
        r"Jobs/Policy/Resource",
    ):
        app.synth()


def test_a_renamed_construct_takes_its_acknowledgments_along(tmp_path):
    """In a copy of the repository, the access-log bucket's construct renamed: dev still synthesizes with every
    rule pack on, its acknowledgments at the new path."""
    tree = tmp_path / "tree"
    _copy_repository(tree)
    stack_py = tree / "stacks" / "data" / "stack.py"
    assert stack_py.read_text().count('"AccessLogBucket"') == 1
    stack_py.write_text(stack_py.read_text().replace('"AccessLogBucket"', '"AccessLogs"'))
    done = subprocess.run([sys.executable, "-c", RENAMED_SYNTH], cwd=tree, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    paths = json.loads(done.stdout.strip().splitlines()[-1])
    assert "AccessLogs" in paths and "AccessLogBucket" not in paths


RENAMED_SYNTH = """
import json, sys, tempfile
from pathlib import Path
sys.path.insert(0, ".")
from stacks.config import load_config
from tests.synth import synth
from tools.security_findings import acknowledgments

with tempfile.TemporaryDirectory() as out:
    found = acknowledgments(Path(synth(load_config("dev", Path("config")), Path(out)).directory))
print(json.dumps(sorted({path for stack, path, rule, _ in found if stack.endswith("-Data")})))
"""


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
