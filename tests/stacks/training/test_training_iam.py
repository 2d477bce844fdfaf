"""Least privilege in the Training stack: every IAM statement is checked, not sampled."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from stacks.config import load_config
from tests.stacks.policy_documents import Resolver
from tests.synth import ROOT
from tools.security_findings import acknowledgments

ENVS = ("dev", "prod")
# Actions AWS offers no resource-level permission for; the only ones allowed with Resource "*".
STAR_ACTIONS = {
    "ecr:GetAuthorizationToken",
    "cloudwatch:PutMetricData",
    "logs:CreateLogDelivery",
    "logs:DeleteLogDelivery",
    "logs:DescribeLogGroups",
    "logs:DescribeResourcePolicies",
    "logs:GetLogDelivery",
    "logs:ListLogDeliveries",
    "logs:PutResourcePolicy",
    "logs:UpdateLogDelivery",
    "xray:GetSamplingRules",
    "xray:GetSamplingTargets",
    "xray:PutTelemetryRecords",
    "xray:PutTraceSegments",
}
# SageMaker's ENI management in a VPC (isolated mode); EC2 offers no resource scoping SageMaker accepts.
ISOLATED = {env: load_config(env, ROOT / "config").network.isolated for env in ("dev", "prod")}
VPC_ACTIONS = {
    "ec2:CreateNetworkInterface",
    "ec2:CreateNetworkInterfacePermission",
    "ec2:DeleteNetworkInterface",
    "ec2:DeleteNetworkInterfacePermission",
    "ec2:DescribeNetworkInterfaces",
    "ec2:DescribeVpcs",
    "ec2:DescribeDhcpOptions",
    "ec2:DescribeSubnets",
    "ec2:DescribeSecurityGroups",
}
BUCKET_ARN = "ExportsOutputFnGetAttArtifactBucket7410C9EFArnA3946625"
KEY_ARN = "ExportsOutputFnGetAttArtifactKey8D84C5F0Arn9D58E80E"


def _list(value):
    return value if isinstance(value, list) else [value]


def _text(value) -> str:
    """A resource as one comparable string; tokens keep their logical ids or export names."""
    return json.dumps(value, sort_keys=True)


def policies(template: dict) -> dict[str, list[dict]]:
    """Managed policy logical id -> statements."""
    return {
        logical_id: resource["Properties"]["PolicyDocument"]["Statement"]
        for logical_id, resource in template["Resources"].items()
        if resource["Type"] == "AWS::IAM::ManagedPolicy"
    }


def statement(template: dict, policy_prefix: str, sid: str) -> dict:
    (found,) = [
        s
        for lid, statements in policies(template).items()
        if lid.startswith(policy_prefix)
        for s in statements
        if s.get("Sid") == sid
    ]
    return found


@pytest.mark.parametrize("env", ENVS)
def test_resource_star_only_where_aws_requires_it(templates, env):
    for policy_id, statements in policies(templates[env]["Training"]).items():
        for s in statements:
            if "*" in _list(s["Resource"]):
                extra = set(_list(s["Action"])) - STAR_ACTIONS
                if extra and extra <= VPC_ACTIONS and ISOLATED[env]:
                    assert "aws:RequestedRegion" in s["Condition"]["StringEquals"], "ENI calls pinned to the region"
                    continue
                assert not extra, f"{policy_id}: {sorted(extra)} with Resource '*'"


@pytest.mark.parametrize("env", ENVS)
def test_no_aws_managed_or_inline_policies(templates, env):
    resources = templates[env]["Training"]["Resources"]
    assert not [k for k, v in resources.items() if v["Type"] == "AWS::IAM::Policy"]
    for logical_id, resource in resources.items():
        if resource["Type"] == "AWS::IAM::Role":
            props = resource["Properties"]
            assert "ManagedPolicyArns" not in props and "Policies" not in props, logical_id
            assert "RoleName" not in props, "role names are generated"


@pytest.mark.parametrize(
    ("env", "read"),
    [("dev", ["datasets/*", "checkpoints/*"]), ("prod", ["datasets/*", "base-models/*", "checkpoints/*"])],
)
def test_training_role_reads_only_what_its_channels_and_checkpoints_name(templates, env, read):
    """dev downloads its base from the hub: no channel reads base-models/; prod's `model` channel does."""
    template = templates[env]["Training"]
    reads = statement(template, "TrainingRolePolicy", "ReadInputs")
    assert reads["Action"] == "s3:GetObject"
    assert sorted(r["Fn::Join"][1][1] for r in reads["Resource"]) == sorted(f"/{p}" for p in read)
    assert all(BUCKET_ARN in _text(r) for r in reads["Resource"])
    listing = statement(template, "TrainingRolePolicy", "ListInputs")
    assert sorted(listing["Condition"]["StringLike"]["s3:prefix"]) == sorted(read)


def test_training_role_reads_and_writes_only_its_prefixes(templates):
    template = templates["dev"]["Training"]
    writes = statement(template, "TrainingRolePolicy", "WriteOutputs")
    assert sorted(_list(writes["Action"])) == ["s3:AbortMultipartUpload", "s3:PutObject"]
    assert sorted(r["Fn::Join"][1][1] for r in writes["Resource"]) == ["/checkpoints/*", "/models/*"]
    code = statement(template, "TrainingRolePolicy", "ReadTrainingCode")
    assert code["Action"] == "s3:GetObject" and code["Resource"]["Fn::Join"][1][-1].endswith(".gz")
    key = statement(template, "TrainingRolePolicy", "UseDataKey")
    assert KEY_ARN in _text(key["Resource"])
    pull = statement(template, "TrainingRolePolicy", "PullTrainingImage")
    assert "HfPytorchTrainingGpuRepository" in _text(pull["Resource"])
    streams = statement(template, "TrainingRolePolicy", "OwnLogStreams")
    assert streams["Resource"]["Fn::Join"][1][-1] == ":log-group:/aws/sagemaker/TrainingJobs:log-stream:llm-inf2-dev-*"
    metrics = statement(template, "TrainingRolePolicy", "TrainingMetrics")
    assert metrics["Condition"] == {"StringEquals": {"cloudwatch:namespace": "/aws/sagemaker/TrainingJobs"}}


def test_training_role_trusts_sagemaker_of_this_account(templates):
    resources = templates["dev"]["Training"]["Resources"]
    (role,) = [v for k, v in resources.items() if k.startswith("TrainingRole") and v["Type"] == "AWS::IAM::Role"]
    (trust,) = role["Properties"]["AssumeRolePolicyDocument"]["Statement"]
    assert trust["Principal"] == {"Service": "sagemaker.amazonaws.com"}
    assert trust["Condition"] == {"StringEquals": {"aws:SourceAccount": {"Ref": "AWS::AccountId"}}}


@pytest.mark.parametrize(
    ("env", "prefix", "benchmarked"), [("dev", "llm-inf2-dev", False), ("prod", "llm-inf2-prod", True)]
)
def test_state_machine_passes_only_its_job_roles_and_owns_only_its_jobs(templates, env, prefix, benchmarked):
    """The training job's role and the compile job's (LMI's partition), and where training.benchmark names tasks
    the benchmark job's own role; nothing else."""
    template = templates[env]["Training"]
    passing = statement(template, "WorkflowPolicy", "PassJobRoles")
    assert passing["Action"] == "iam:PassRole"
    passed = sorted(r["Fn::GetAtt"][0] for r in passing["Resource"])
    assert passed[0].startswith("CompileRole") and passed[1] == "TrainingRoleA2F7D4DF"
    assert [r.startswith("WorkflowBenchmarkRole") for r in passed[2:]] == ([True] if benchmarked else [])
    assert passing["Condition"] == {"StringEquals": {"iam:PassedToService": "sagemaker.amazonaws.com"}}
    jobs = statement(template, "WorkflowPolicy", "OwnTrainingJobs")
    assert sorted(jobs["Action"]) == [
        "sagemaker:AddTags",
        "sagemaker:CreateTrainingJob",
        "sagemaker:DescribeTrainingJob",
        "sagemaker:ListTags",
        "sagemaker:StopTrainingJob",
    ]
    assert jobs["Resource"]["Fn::Join"][1][-1] == f":training-job/{prefix}-*"


def test_rule_role_may_only_start_this_state_machine(templates):
    template = templates["dev"]["Training"]
    (statements,) = [v for k, v in policies(template).items() if k.startswith("RulePolicy")]
    assert statements == [
        {"Action": "states:StartExecution", "Effect": "Allow", "Resource": {"Ref": statements[0]["Resource"]["Ref"]}}
    ]
    assert statements[0]["Resource"]["Ref"].startswith("WorkflowStateMachine")


@pytest.mark.parametrize("env", ENVS)
def test_every_star_acknowledgment_is_explained(assemblies, env):
    training = [
        (path, rule, reason)
        for stack, path, rule, reason in acknowledgments(Path(assemblies[env].directory))
        if stack.endswith("-Training") and rule.startswith("AwsSolutions-")
    ]
    benchmarked = bool(load_config(env, ROOT / "config").training.benchmark.tasks)  # its job's own role
    paths = {"TrainingRole/Policy/Resource", "Workflow/Policy/Resource", "CompileRole/Policy/Resource"}
    paths |= {"Workflow/Benchmark/Role/Policy/Resource"} if benchmarked else set()
    assert {path for path, _, _ in training} == paths
    assert all(rule.startswith("AwsSolutions-IAM5[Resource::") for _, rule, _ in training)
    star = [reason for _, rule, reason in training if rule == "AwsSolutions-IAM5[Resource::*]"]
    assert len(star) == len(paths) and all("no resource-level permissions" in reason for reason in star)


@pytest.mark.parametrize("env", ENVS)
def test_the_registry_statements_register_only_unapproved_versions_in_this_group(templates, env):
    """CreateModelPackage (service authorization reference: resource types model-package and
    model-package-group, condition key sagemaker:ModelApprovalStatus) on this environment's group only, never
    Approved; ListBucketVersions under datasets/; PutObject of lineage manifests only."""
    stacks = {f"llm-inf2-{env}-{unit}": templates[env][unit] for unit in ("Data", "Training")}
    data = templates[env]["Data"]
    group = Resolver(stacks).resolve(f"llm-inf2-{env}-Data", data["Outputs"]["ModelPackageGroupName"]["Value"])
    register = statement(templates[env]["Training"], "WorkflowPolicy", "RegisterModelPackages")
    assert register["Action"] == "sagemaker:CreateModelPackage"
    imported = _text({"Fn::ImportValue": f"llm-inf2-{env}-Data:ModelPackageGroupName"})
    assert all(imported in _text(r) for r in register["Resource"]), "the group's name is the Data stack's export"
    resources = Resolver(stacks).resolve(f"llm-inf2-{env}-Training", register["Resource"])
    assert len(resources) == 2
    assert sum(r.endswith(f":model-package/{group}/*") for r in resources) == 1
    assert sum(r.endswith(f":model-package-group/{group}") for r in resources) == 1
    assert register["Condition"] == {
        "StringEquals": {"sagemaker:ModelApprovalStatus": ["PendingManualApproval", "Rejected"]}
    }
    listing = statement(templates[env]["Training"], "WorkflowPolicy", "ListDatasetVersions")
    assert listing["Action"] == "s3:ListBucketVersions" and BUCKET_ARN in _text(listing["Resource"])
    assert listing["Condition"] == {"StringLike": {"s3:prefix": ["datasets/*"]}}
    lineage = statement(templates[env]["Training"], "WorkflowPolicy", "WriteLineage")
    assert lineage["Action"] == "s3:PutObject" and "/models/*/lineage.json" in _text(lineage["Resource"])
    facts = statement(templates[env]["Training"], "WorkflowPolicy", "ReadModelFacts")
    assert facts["Action"] == "s3:GetObject" and BUCKET_ARN in _text(facts["Resource"])
    assert _text(facts["Resource"]).endswith('/models/*/output/model/model_facts.json"]]}')


@pytest.mark.parametrize("env", ENVS)
def test_the_workflow_can_decrypt_and_encrypt_the_objects_its_registry_reads_and_writes(templates, env):
    """The bucket is SSE-KMS with the data key (a bucket key too): S3 GetObject needs the caller's kms:Decrypt,
    PutObject its kms:GenerateDataKey, on that key; aws-cdk-lib's CallAwsService grants neither, only s3:*."""
    data_key = statement(templates[env]["Training"], "WorkflowPolicy", "EncryptNotification")
    assert sorted(_list(data_key["Action"])) == ["kms:Decrypt", "kms:GenerateDataKey"]
    assert KEY_ARN in _text(data_key["Resource"])
    sse = templates[env]["Data"]["Resources"]
    (bucket,) = [r for k, r in sse.items() if k.startswith("ArtifactBucket") and r["Type"] == "AWS::S3::Bucket"]
    rule = bucket["Properties"]["BucketEncryption"]["ServerSideEncryptionConfiguration"][0]
    assert rule["ServerSideEncryptionByDefault"]["KMSMasterKeyID"]["Fn::GetAtt"][0].startswith("ArtifactKey")
