"""Fine-grained assertions on the stateful data layer, for every environment."""

from __future__ import annotations

import uuid

import pytest
from aws_cdk.assertions import Match, Template

from tests.conftest import ENVIRONMENTS
from tests.stacks.policy_documents import Resolver

ENVS = ("dev", "prod")


def _only(template: dict, resource_type: str, path_fragment: str) -> dict:
    found = [
        r
        for r in template["Resources"].values()
        if r["Type"] == resource_type and path_fragment in r.get("Metadata", {}).get("aws:cdk:path", "")
    ]
    assert len(found) == 1, f"expected one {resource_type} at {path_fragment}, got {len(found)}"
    return found[0]


@pytest.mark.parametrize("env", ENVS)
def test_key_rotates_and_is_retained(templates, env):
    template = Template.from_json(templates[env]["Data"])
    template.resource_count_is("AWS::KMS::Key", 1)
    template.has_resource(
        "AWS::KMS::Key",
        {"Properties": {"EnableKeyRotation": True}, "DeletionPolicy": "Retain", "UpdateReplacePolicy": "Retain"},
    )


@pytest.mark.parametrize("env", ENVS)
def test_artifact_bucket_is_kms_encrypted_versioned_private_and_retained(templates, env):
    bucket = _only(templates[env]["Data"], "AWS::S3::Bucket", "/ArtifactBucket/")
    props = bucket["Properties"]
    assert bucket["DeletionPolicy"] == "Retain" and bucket["UpdateReplacePolicy"] == "Retain"
    assert "BucketName" not in props, "the bucket name must be generated"
    sse = props["BucketEncryption"]["ServerSideEncryptionConfiguration"][0]
    assert sse["BucketKeyEnabled"] is True
    assert sse["ServerSideEncryptionByDefault"]["SSEAlgorithm"] == "aws:kms"
    assert sse["ServerSideEncryptionByDefault"]["KMSMasterKeyID"]["Fn::GetAtt"][1] == "Arn"
    assert props["VersioningConfiguration"] == {"Status": "Enabled"}
    assert props["PublicAccessBlockConfiguration"] == {
        "BlockPublicAcls": True,
        "BlockPublicPolicy": True,
        "IgnorePublicAcls": True,
        "RestrictPublicBuckets": True,
    }
    assert props["OwnershipControls"]["Rules"] == [{"ObjectOwnership": "BucketOwnerEnforced"}]
    assert props["NotificationConfiguration"] == {"EventBridgeConfiguration": {"EventBridgeEnabled": True}}


@pytest.mark.parametrize("env", ENVS)
def test_artifact_bucket_logs_to_the_log_bucket(templates, env):
    resources = templates[env]["Data"]["Resources"]
    bucket = _only(templates[env]["Data"], "AWS::S3::Bucket", "/ArtifactBucket/")
    target = bucket["Properties"]["LoggingConfiguration"]["DestinationBucketName"]["Ref"]
    assert "/AccessLogBucket/" in resources[target]["Metadata"]["aws:cdk:path"]
    assert bucket["Properties"]["LoggingConfiguration"]["LogFilePrefix"] == "artifact-bucket/"
    log_bucket = resources[target]
    assert log_bucket["DeletionPolicy"] == "Retain"
    assert log_bucket["Properties"]["BucketEncryption"]["ServerSideEncryptionConfiguration"][0][
        "ServerSideEncryptionByDefault"
    ] == {"SSEAlgorithm": "AES256"}


@pytest.mark.parametrize("env", ENVS)
def test_both_buckets_deny_plain_http(templates, env):
    template = Template.from_json(templates[env]["Data"])
    policies = template.find_resources("AWS::S3::BucketPolicy")
    assert len(policies) == 2
    for policy in policies.values():
        statements = policy["Properties"]["PolicyDocument"]["Statement"]
        tls = [s for s in statements if s.get("Condition", {}).get("Bool", {}).get("aws:SecureTransport") == "false"]
        assert len(tls) == 1 and tls[0]["Effect"] == "Deny" and tls[0]["Action"] == "s3:*"


def test_access_log_delivery_is_granted_to_the_logging_service_only(templates):
    template = Template.from_json(templates["dev"]["Data"])
    template.has_resource_properties(
        "AWS::S3::BucketPolicy",
        {
            "PolicyDocument": {
                "Statement": Match.array_with(
                    [
                        Match.object_like(
                            {
                                "Effect": "Allow",
                                "Action": "s3:PutObject",
                                "Principal": {"Service": "logging.s3.amazonaws.com"},
                            }
                        )
                    ]
                )
            }
        },
    )


@pytest.mark.parametrize(
    ("env", "noncurrent_days", "abort_days", "log_days"),
    [("dev", 30, 3, 90), ("prod", 365, 7, 730)],
)
def test_lifecycle_follows_the_environment(templates, env, noncurrent_days, abort_days, log_days):
    artifact = _only(templates[env]["Data"], "AWS::S3::Bucket", "/ArtifactBucket/")
    rule = artifact["Properties"]["LifecycleConfiguration"]["Rules"][0]
    assert rule["NoncurrentVersionExpiration"] == {"NoncurrentDays": noncurrent_days}
    assert rule["AbortIncompleteMultipartUpload"] == {"DaysAfterInitiation": abort_days}
    logs = _only(templates[env]["Data"], "AWS::S3::Bucket", "/AccessLogBucket/")
    assert logs["Properties"]["LifecycleConfiguration"]["Rules"][0]["ExpirationInDays"] == log_days


def test_outputs_name_bucket_and_key(templates):
    outputs = templates["dev"]["Data"]["Outputs"]
    assert {"ArtifactBucketName", "ArtifactKeyArn", "AccessLogBucketName"} <= set(outputs)


def test_termination_protection_only_in_prod(assemblies):
    protection = {env: {s.stack_name: s.termination_protection for s in a.stacks} for env, a in assemblies.items()}
    assert protection["prod"]["llm-inf2-prod-Data"] is True
    assert protection["dev"]["llm-inf2-dev-Data"] is False


class _NewStack(Resolver):
    """The same templates deployed as new stacks: another UUID in each AWS::StackId."""

    def _Ref(self, stack, target):
        found = super()._Ref(stack, target)
        return found.rsplit("/", 1)[0] + "/" + str(uuid.uuid4()) if target == "AWS::StackId" else found


def test_each_environment_has_its_own_retained_model_package_group(templates):
    """CloudFormation requires the group's name: generated from the stack path (unique per environment) and
    the stack's id (unique per stack, so a redeploy after `cdk destroy` does not collide with the retained
    group), lower case (package ARNs, which the IAM scopes match, carry it as is), within the API's 63 and
    pattern; exported for the Training stack."""
    import regex

    names = set()
    for env in ENVIRONMENTS:
        data = templates[env]["Data"]
        group = _only(data, "AWS::SageMaker::ModelPackageGroup", "/ModelPackageGroup")
        assert group["DeletionPolicy"] == "Retain" and group["UpdateReplacePolicy"] == "Retain"
        stack = f"llm-inf2-{env}-Data"
        name = Resolver({stack: data}).resolve(stack, group["Properties"]["ModelPackageGroupName"])
        assert name == name.lower() and len(name) <= 63 and regex.fullmatch(r"[a-zA-Z0-9](-*[a-zA-Z0-9])*", name)
        assert name.rsplit("-", 1)[1] == Resolver({})._Ref(stack, "AWS::StackId").rsplit("-", 1)[1]
        redeployed = _NewStack({stack: data}).resolve(stack, group["Properties"]["ModelPackageGroupName"])
        assert redeployed != name and redeployed.rsplit("-", 1)[0] == name.rsplit("-", 1)[0]
        output = data["Outputs"]["ModelPackageGroupName"]
        assert output["Value"] == group["Properties"]["ModelPackageGroupName"]
        assert output["Export"] == {"Name": f"{stack}:ModelPackageGroupName"}
        names.add(name)
    assert len(names) == len(ENVIRONMENTS)
