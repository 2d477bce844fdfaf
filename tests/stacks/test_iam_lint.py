"""Every IAM policy document of dev and prod passes parliament (the IAM linter): no finding of medium or higher.

Identity policies (managed, inline) and resource policies (KMS key, bucket, topic) are linted with their
intrinsics resolved (tests/stacks/policy_documents.py). Trust policies (AssumeRolePolicyDocument) are not:
parliament has no trust-policy mode and reports every one as MALFORMED for lacking a Resource, which a
trust policy must not have. A finding the team accepts is listed below, one issue on one document with the
reason; an entry that matches nothing fails, so the table cannot rot.
"""

from __future__ import annotations

import json
import warnings

import pytest

from tests.stacks.policy_documents import policy_documents

with warnings.catch_warnings():
    warnings.simplefilter("ignore", UserWarning)  # parliament 1.6.4 imports the deprecated pkg_resources
    import parliament

SEVERITIES = ("MEDIUM", "HIGH", "CRITICAL")
ACCEPTED = {
    # (stack unit, document, issue): reason
    (
        "Data",
        "ArtifactKey8D84C5F0.KeyPolicy",
        "MISMATCHED_TYPE",
    ): "ArnLike on kms:EncryptionContext:aws:logs:arn is the form AWS documents for CloudWatch Logs key "
    "policies (the value is a log-group ARN); parliament types every kms:EncryptionContext key as String.",
}


def _findings(templates: dict[str, dict]) -> list[tuple[str, str, str, str, str]]:
    found = []
    for stack, where, document in policy_documents(templates):
        if where.endswith(".AssumeRolePolicyDocument"):
            continue
        policy = parliament.analyze_policy_string(json.dumps(document))
        for finding in policy.findings:
            severity = parliament.config.get(finding.issue, {}).get("severity", "UNKNOWN")
            found.append((stack.rsplit("-", 1)[-1], where, finding.issue, severity, str(finding.detail)[:300]))
    return found


@pytest.fixture(scope="module")
def findings(assemblies):
    return {env: _findings({s.stack_name: s.template for s in assembly.stacks}) for env, assembly in assemblies.items()}


def test_every_policy_document_is_linted(assemblies):
    for env_name, assembly in assemblies.items():
        documents = policy_documents({s.stack_name: s.template for s in assembly.stacks})
        kinds = {where.split(".", 1)[1].split(".")[0] for _, where, _ in documents}
        assert {"PolicyDocument", "KeyPolicy"} <= kinds, env_name
        assert len(documents) >= 15, env_name


@pytest.mark.parametrize("env_name", ["dev", "prod"])
def test_no_unaccepted_finding_of_medium_or_higher(findings, env_name):
    serious = [f for f in findings[env_name] if f[3] in SEVERITIES or f[3] == "UNKNOWN"]
    unaccepted = [f for f in serious if f[:3] not in ACCEPTED]
    assert unaccepted == [], "\n".join(map(str, unaccepted))


def test_accepted_findings_still_occur(findings):
    seen = {f[:3] for env in findings.values() for f in env}
    assert [key for key in ACCEPTED if key not in seen] == []


def test_the_linter_finds_a_wildcard_network_interface_grant():
    """The check can fail: a VPC statement granting the ENI actions on '*' is reported."""
    document = {
        "Version": "2012-10-17",
        "Statement": [
            {"Effect": "Allow", "Resource": "*", "Action": ["ec2:CreateNetworkInterface", "ec2:DeleteNetworkInterface"]}
        ],
    }
    issues = {f.issue for f in parliament.analyze_policy_string(json.dumps(document)).findings}
    assert "RESOURCE_STAR" in issues
    bad_condition = {
        "Version": "2012-10-17",
        "Statement": [
            {
                "Effect": "Allow",
                "Resource": "*",
                "Action": "kms:DescribeKey",
                "Condition": {
                    "ArnLike": {"kms:EncryptionContext:aws:logs:arn": "arn:aws:logs:us-east-1:1:log-group:*"}
                },
            }
        ],
    }
    found = parliament.analyze_policy_string(json.dumps(bad_condition)).findings
    assert any(parliament.config[f.issue]["severity"] == "MEDIUM" for f in found)


ENI_ACTIONS = {
    "ec2:CreateNetworkInterface",
    "ec2:CreateNetworkInterfacePermission",
    "ec2:DeleteNetworkInterface",
    "ec2:DeleteNetworkInterfacePermission",
}


def test_network_interface_grants_name_the_placement(assemblies):
    """Isolated mode (prod): ENI actions only on interfaces, subnets and groups of the placement, never '*'."""
    grants = []
    for stack, where, document in policy_documents({s.stack_name: s.template for s in assemblies["prod"].stacks}):
        for statement in document.get("Statement", []):
            actions, resources = (statement.get(k, []) for k in ("Action", "Resource"))
            actions, resources = ([v] if isinstance(v, str) else v for v in (actions, resources))
            if ENI_ACTIONS & set(actions):
                assert "*" not in resources, (stack, where, statement)
                grants.append((stack.rsplit("-", 1)[-1], statement["Sid"], resources, statement.get("Condition")))
    assert {unit for unit, *_ in grants} == {"Training", "Serving"}
    for _, sid, resources, condition in grants:
        if sid == "CreateJobNetworkInterfaces":
            kinds = sorted({r.split(":")[5].split("/")[0] for r in resources})
            assert kinds == ["network-interface", "security-group", "subnet"]
        else:
            assert sid == "ManageJobNetworkInterfaces" and resources[0].endswith(":network-interface/*")
            assert all(":subnet/" in arn for arn in condition["ArnEquals"]["ec2:Subnet"])
