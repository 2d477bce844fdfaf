"""Teardown drill on our stacks: delete every stack, the Data stack last, and the data survives.

The Data stack's key, buckets and model package group are retained (DeletionPolicy Retain, termination
protection in prod): deleting the stack must remove the stack and what it does not retain, and leave the
bucket, every version of its objects, the access-log bucket, the key and the group with its versions, usable.
A new Data stack then deploys beside them, because no retained resource has a fixed name: CloudFormation
creates a new stack's resources anew and adopts none, so a name the retained group still holds would fail the
deploy (the emulator refuses it as AWS does; the second test shows it with the group's name made fixed).
"""

from __future__ import annotations

import json
import shutil

import pytest

from local.emulator import LocalAws
from local.emulator.emulator import DeployError

pytestmark = pytest.mark.slow
STACKS = ("llm-inf2-dev-Data", "llm-inf2-dev-Training", "llm-inf2-dev-Serving", "llm-inf2-dev-Pruning")
KEY = "datasets/drill/train-0.jsonl"


def _register_a_version(aws, group: str) -> str:
    """A version in the group, as the Training workflow's RegisterModel adds one."""
    return aws.client("sagemaker").create_model_package(
        ModelPackageGroupName=group, ModelPackageDescription="drill", ModelApprovalStatus="Rejected"
    )["ModelPackageArn"]


def _versions(aws, group: str) -> list[str]:
    listed = aws.client("sagemaker").list_model_packages(ModelPackageGroupName=group)["ModelPackageSummaryList"]
    return [p["ModelPackageArn"] for p in listed]


def test_deleting_every_stack_keeps_the_bucket_its_versions_and_the_key(assemblies):
    cdk_out = assemblies["dev"].directory
    with LocalAws.start() as aws:
        aws.bootstrap()
        outputs = aws.deploy(cdk_out, list(STACKS))
        data = outputs[STACKS[0]]
        bucket, log_bucket = data["ArtifactBucketName"], data["AccessLogBucketName"]
        key_id = data["ArtifactKeyArn"].rsplit("/", 1)[-1]
        s3, kms = aws.client("s3"), aws.client("kms")
        versions = [s3.put_object(Bucket=bucket, Key=KEY, Body=body)["VersionId"] for body in (b"v1\n", b"v2\n")]
        machines = {o["StateMachineArn"] for o in outputs.values() if "StateMachineArn" in o}
        group = data["ModelPackageGroupName"]
        package = _register_a_version(aws, group)

        for stack in reversed(STACKS):
            aws.delete(stack)
            assert aws._existing(stack) is None, stack

        listed = {m["stateMachineArn"] for m in aws.client("stepfunctions").list_state_machines()["stateMachines"]}
        assert not machines & listed, "the workflows went with their stacks"
        assert {bucket, log_bucket} <= {b["Name"] for b in s3.list_buckets()["Buckets"]}
        assert [s3.get_object(Bucket=bucket, Key=KEY, VersionId=v)["Body"].read() for v in versions] == [
            b"v1\n",
            b"v2\n",
        ]
        assert s3.get_bucket_versioning(Bucket=bucket)["Status"] == "Enabled"
        metadata = kms.describe_key(KeyId=key_id)["KeyMetadata"]
        assert metadata["KeyState"] == "Enabled"
        assert kms.get_key_rotation_status(KeyId=key_id)["KeyRotationEnabled"]

        assert _versions(aws, group) == [package], "the retained group keeps its versions"

        again = aws.deploy(cdk_out, [STACKS[0]])[STACKS[0]]
        assert again["ArtifactBucketName"] != bucket, "a new Data stack gets new generated names"
        assert again["ModelPackageGroupName"] != group and _versions(aws, again["ModelPackageGroupName"]) == []
        assert s3.get_object(Bucket=bucket, Key=KEY)["Body"].read() == b"v2\n"
        assert _versions(aws, group) == [package], "the new group lives beside the retained one"


def test_a_retained_group_with_a_fixed_name_would_block_the_redeploy(assemblies, tmp_path):
    """The control: the Data stack with its group's name as a literal deploys once, and not again after its
    stack is deleted, because the retained group still holds the name."""
    cdk_out = tmp_path / "cdk.out"
    shutil.copytree(assemblies["dev"].directory, cdk_out)
    template = cdk_out / f"{STACKS[0]}.template.json"
    body = json.loads(template.read_text())
    body["Resources"]["ModelPackageGroup"]["Properties"]["ModelPackageGroupName"] = "llminf2devdata-models"
    body["Outputs"]["ModelPackageGroupName"]["Value"] = "llminf2devdata-models"
    template.write_text(json.dumps(body))
    with LocalAws.start() as aws:
        aws.bootstrap()
        aws.deploy(cdk_out, [STACKS[0]])
        aws.delete(STACKS[0])
        with pytest.raises(DeployError, match=r"model package group llminf2devdata-models already exists"):
            aws.deploy(cdk_out, [STACKS[0]])
