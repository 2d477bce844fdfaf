"""Teardown drill on our stacks: delete every stack, the Data stack last, and the data survives.

The Data stack's key and buckets are retained (DeletionPolicy Retain, termination protection in prod):
deleting the stack must remove the stack and what it does not retain, and leave the bucket, every version
of its objects, the access-log bucket and the key, usable. A new Data stack then deploys beside them,
because no replaceable resource has a fixed name.
"""

from __future__ import annotations

import pytest

from local.emulator import LocalAws

pytestmark = pytest.mark.slow
STACKS = ("llm-inf2-dev-Data", "llm-inf2-dev-Training", "llm-inf2-dev-Serving", "llm-inf2-dev-Pruning")
KEY = "datasets/drill/train-0.jsonl"


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

        again = aws.deploy(cdk_out, [STACKS[0]])[STACKS[0]]
        assert again["ArtifactBucketName"] != bucket, "a new Data stack gets new generated names"
        assert s3.get_object(Bucket=bucket, Key=KEY)["Body"].read() == b"v2\n"
