"""The emulator deploys the real synthesized templates, redeploys as a no-op, reports what it skips, and fills
rule input as EventBridge does."""

from __future__ import annotations

import json

import pytest

from local.emulator import CloudAssemblyReader, LocalAws
from local.emulator.emulator import DeployError
from local.emulator.execution_patches import transformed_input


@pytest.fixture(scope="module")
def local_aws():
    with LocalAws.start() as aws:
        aws.bootstrap()
        yield aws


def test_data_stack_deploys_and_redeploy_is_a_no_op(local_aws, assemblies):
    cdk_out = assemblies["dev"].directory
    outputs = local_aws.deploy(cdk_out, ["llm-inf2-dev-Data"])["llm-inf2-dev-Data"]
    bucket = outputs["ArtifactBucketName"]
    s3 = local_aws.client("s3")
    tags = {t["Key"]: t["Value"] for t in s3.get_bucket_tagging(Bucket=bucket)["TagSet"]}
    assert tags["environment"] == "dev"  # moto models encryption and tags of CFN buckets, not versioning
    sse = s3.get_bucket_encryption(Bucket=bucket)["ServerSideEncryptionConfiguration"]["Rules"][0]
    assert sse["ApplyServerSideEncryptionByDefault"]["SSEAlgorithm"] == "aws:kms"
    events_before = local_aws.client("cloudformation").describe_stack_events(StackName="llm-inf2-dev-Data")
    local_aws.deploy(cdk_out, ["llm-inf2-dev-Data"])
    events_after = local_aws.client("cloudformation").describe_stack_events(StackName="llm-inf2-dev-Data")
    assert len(events_after["StackEvents"]) == len(events_before["StackEvents"]), "unchanged template must not update"
    assert local_aws.status("llm-inf2-dev-Data") == "CREATE_COMPLETE"


def test_skipped_resource_types_are_reported(local_aws, assemblies):
    reader = CloudAssemblyReader(assemblies["dev"].directory)
    data = next(s for s in reader.in_dependency_order() if s.stack_name == "llm-inf2-dev-Data")
    local_aws.deploy(assemblies["dev"].directory, ["llm-inf2-dev-Data"])
    assert set(local_aws.skipped_resources(data).values()) == {"AWS::S3::BucketPolicy"}


def test_bootstrap_matches_what_templates_expect(local_aws):
    param = local_aws.client("ssm").get_parameter(Name="/cdk-bootstrap/hnb659fds/version")["Parameter"]
    assert int(param["Value"]) >= 6
    assert local_aws.assets_bucket == "cdk-hnb659fds-assets-123456789012-us-east-1"


def test_inf2_is_allowed_but_unknown_types_still_rejected(local_aws):
    sagemaker = local_aws.client("sagemaker")
    sagemaker.create_model(
        ModelName="m",
        ExecutionRoleArn="arn:aws:iam::123456789012:role/r",
        PrimaryContainer={"Image": "123456789012.dkr.ecr.us-east-1.amazonaws.com/x:1"},
    )
    variant = {"VariantName": "v", "ModelName": "m", "InitialInstanceCount": 1}
    sagemaker.create_endpoint_config(
        EndpointConfigName="ok", ProductionVariants=[{**variant, "InstanceType": "ml.inf2.xlarge"}]
    )
    with pytest.raises(sagemaker.exceptions.ClientError, match="InstanceType|instance"):
        sagemaker.create_endpoint_config(
            EndpointConfigName="bad", ProductionVariants=[{**variant, "InstanceType": "ml.bogus.xlarge"}]
        )


def test_failed_create_raises_with_the_reason_and_leaves_no_stack(local_aws, tmp_path):
    local_aws.client("s3").create_bucket(Bucket="drill-taken-name")
    (tmp_path / "manifest.json").write_text(
        '{"version": "1", "artifacts": {"Bad": {"type": "aws:cloudformation:stack", '
        '"properties": {"templateFile": "Bad.template.json"}}}}'
    )
    (tmp_path / "Bad.template.json").write_text(
        '{"Resources": {"Clash": {"Type": "AWS::S3::Bucket", "Properties": {"BucketName": "drill-taken-name"}}}}'
    )
    reason = r"^Bad: create failed and was rolled back: The requested bucket name is not available"
    with pytest.raises(DeployError, match=reason) as failure:
        local_aws.deploy(tmp_path)
    assert "\n" not in str(failure.value)
    stacks = local_aws.client("cloudformation").list_stacks()["StackSummaries"]
    assert [s["StackStatus"] for s in stacks if s["StackName"] == "Bad"] in ([], ["DELETE_COMPLETE"])


# The EventBridge user guide's "Input transform examples" (eb-transform-target-input): its EC2 event, input paths,
# and each JSON template with the output the guide gives for it.
GUIDE_EVENT = {
    "time": "2015-11-11T21:29:54Z",
    "resources": ["arn:aws:ec2:us-east-1:123456789012:instance/i-abcd1111"],
    "detail": {"instance-id": "i-0123456789", "state": "RUNNING"},
}
GUIDE_PATHS = {"timestamp": "$.time", "instance": "$.detail.instance-id", "state": "$.detail.state"}
GUIDE_EXAMPLES = [
    ('{"instance" : <instance>, "state": <state>}', {"instance": "i-0123456789", "state": "RUNNING"}),
    (
        '{"instance" : <instance>, "state": "<state>", "instanceStatus": "instance \\"<instance>\\" is in <state>"}',
        {"instance": "i-0123456789", "state": "RUNNING", "instanceStatus": 'instance "i-0123456789" is in RUNNING'},
    ),
    (
        '{"instance" : <instance>, "state": [ 9, <state>, true ], "Transformed" : "Yes"}',
        {"instance": "i-0123456789", "state": [9, "RUNNING", True], "Transformed": "Yes"},
    ),
]


@pytest.mark.parametrize(("template", "output"), GUIDE_EXAMPLES)
def test_rule_input_is_transformed_as_the_eventbridge_guide_shows(template, output):
    assert json.loads(transformed_input(template, GUIDE_PATHS, GUIDE_EVENT)) == output


def test_a_path_missing_from_the_event_is_null_in_a_json_rule_input():
    paths = {"version": "$.detail.object.version-id", "key": "$.detail.object.key"}
    event = {"detail": {"object": {"key": "datasets/a/_READY"}}}  # an unversioned bucket's event has no version-id
    assert json.loads(transformed_input('{"v": <version>, "k": "<key>"}', paths, event)) == {
        "v": None,
        "k": "datasets/a/_READY",
    }
