"""The local deployer's stand-in for CloudFormation's rollback: a failed deploy leaves no half stack.

moto answers a failing resource with an error instead of rolling back; the deployer re-applies the last good
template (update) or deletes the half-created stack (create), as CloudFormation would. This is the harness,
not our stacks: the drills on our stacks are tests/security/test_teardown_drill.py and the workflow drills
in tests/local/emulator/test_training_workflow.py.
"""

from __future__ import annotations

import json
import shutil

import pytest

from local.emulator import LocalAws
from local.emulator.emulator import DeployError

DATA, TRAINING, SERVING = "llm-inf2-dev-Data", "llm-inf2-dev-Training", "llm-inf2-dev-Serving"
OBJECT_KEY = "datasets/drill/train.jsonl"


@pytest.fixture(scope="module")
def deployed(assemblies):
    cdk_out = assemblies["dev"].directory
    with LocalAws.start() as aws:
        aws.bootstrap()
        outputs = aws.deploy(cdk_out, [TRAINING, SERVING])
        bucket = outputs[DATA]["ArtifactBucketName"]
        aws.client("s3").put_object(Bucket=bucket, Key=OBJECT_KEY, Body=b'{"text": "keep me"}\n')
        yield aws, cdk_out, bucket


def _object(aws: LocalAws, bucket: str) -> bytes:
    return aws.client("s3").get_object(Bucket=bucket, Key=OBJECT_KEY)["Body"].read()


def test_failed_update_rolls_back_and_keeps_the_data(deployed, tmp_path):
    aws, cdk_out, bucket = deployed
    broken = tmp_path / "cdk.out"
    shutil.copytree(cdk_out, broken)
    template_path = broken / f"{SERVING}.template.json"
    template = json.loads(template_path.read_text())
    resources_before = set(aws.resources(SERVING))
    # A new resource that deploys, then one that fails midway: a bucket whose name is already taken.
    template["Resources"]["DrillTopic"] = {"Type": "AWS::SNS::Topic", "Properties": {}}
    template["Resources"]["DrillClash"] = {"Type": "AWS::S3::Bucket", "Properties": {"BucketName": bucket}}
    template_path.write_text(json.dumps(template))

    with pytest.raises(DeployError, match="update failed and was rolled back"):
        aws.deploy(broken, [SERVING])

    assert set(aws.resources(SERVING)) == resources_before, "the half-applied update must be gone"
    assert aws.status(DATA) == "CREATE_COMPLETE"
    assert _object(aws, bucket) == b'{"text": "keep me"}\n'


def test_next_deploy_after_a_failure_succeeds(deployed):
    aws, cdk_out, bucket = deployed
    outputs = aws.deploy(cdk_out, [SERVING])
    assert aws.status(SERVING) in {"CREATE_COMPLETE", "UPDATE_COMPLETE"}
    assert outputs[SERVING]
    endpoint = outputs[SERVING]["EndpointName"]
    assert aws.client("sagemaker").describe_endpoint(EndpointName=endpoint)["EndpointStatus"] == "InService"


def test_failed_create_leaves_no_half_stack(deployed, tmp_path):
    aws, cdk_out, bucket = deployed
    (tmp_path / "manifest.json").write_text(
        json.dumps(
            {
                "version": "1",
                "artifacts": {
                    "Drill": {
                        "type": "aws:cloudformation:stack",
                        "properties": {"templateFile": "Drill.template.json", "stackName": "drill"},
                    }
                },
            }
        )
    )
    (tmp_path / "Drill.template.json").write_text(
        json.dumps(
            {
                "Resources": {
                    "Clash": {"Type": "AWS::S3::Bucket", "Properties": {"BucketName": bucket}},
                }
            }
        )
    )
    with pytest.raises(DeployError, match="create failed and was rolled back"):
        aws.deploy(tmp_path)
    assert aws._existing("drill") is None
    assert _object(aws, bucket) == b'{"text": "keep me"}\n'
