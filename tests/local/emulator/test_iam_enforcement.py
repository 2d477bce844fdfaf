"""The emulator enforces IAM: a job runs as its execution role and a state machine's calls as its role, so what a
role does not allow fails AccessDenied naming the action and the resource (ARNs in AWS's formats)."""

from __future__ import annotations

import json
import time

import pytest
from botocore.exceptions import ClientError

from local.emulator import LocalAws

BUCKET = "iam-enforcement"
ACCOUNT = "123456789012"  # moto's default account
PARAMETER = "/iam/model"


def _trust(service: str) -> str:
    statement = {"Effect": "Allow", "Principal": {"Service": service}, "Action": "sts:AssumeRole"}
    return json.dumps({"Version": "2012-10-17", "Statement": [statement]})


def _policy(*statements: dict) -> str:
    return json.dumps({"Version": "2012-10-17", "Statement": list(statements)})


@pytest.fixture(scope="module")
def aws(tmp_path_factory):
    with LocalAws.start(work_root=tmp_path_factory.mktemp("jobs"), time_scale=0.001) as emulator:
        emulator.client("s3").create_bucket(Bucket=BUCKET)
        emulator.client("s3").put_object(Bucket=BUCKET, Key="datasets/set/a.jsonl", Body=b'{"text": "x"}\n')
        yield emulator


def _role(aws: LocalAws, name: str, service: str, *statements: dict) -> str:
    iam = aws.client("iam")
    arn = iam.create_role(RoleName=name, AssumeRolePolicyDocument=_trust(service))["Role"]["Arn"]
    iam.put_role_policy(RoleName=name, PolicyName="grants", PolicyDocument=_policy(*statements))
    return arn


def _job(name: str, role_arn: str) -> dict:
    return {
        "TrainingJobName": name,
        "RoleArn": role_arn,
        "HyperParameters": {"sagemaker_program": '"entry.py"'},
        "AlgorithmSpecification": {"TrainingImage": "image", "TrainingInputMode": "File"},
        "InputDataConfig": [
            {
                "ChannelName": "training",
                "DataSource": {"S3DataSource": {"S3DataType": "S3Prefix", "S3Uri": f"s3://{BUCKET}/datasets/set/"}},
            }
        ],
        "OutputDataConfig": {"S3OutputPath": f"s3://{BUCKET}/models/"},
        "ResourceConfig": {"InstanceType": "ml.m5.large", "InstanceCount": 1, "VolumeSizeInGB": 1},
        "StoppingCondition": {"MaxRuntimeInSeconds": 60},
    }


def test_the_deployer_is_signed_and_an_unknown_key_is_refused(aws):
    assert aws.client("sts").get_caller_identity()["Arn"] == f"arn:aws:iam::{ACCOUNT}:user/emulator-operator"
    import boto3

    stranger = boto3.client(
        "s3",
        endpoint_url=aws.endpoint_url,
        region_name=aws.region,
        aws_access_key_id="AKIAUNKNOWN00000000",
        aws_secret_access_key="x",
    )
    with pytest.raises(ClientError, match="InvalidAccessKeyId"):
        stranger.list_objects_v2(Bucket=BUCKET)


def test_a_job_whose_role_cannot_read_its_channel_fails_access_denied_naming_action_and_resource(aws):
    listing = {"Effect": "Allow", "Action": "s3:ListBucket", "Resource": f"arn:aws:s3:::{BUCKET}"}
    code_only = {"Effect": "Allow", "Action": "s3:GetObject", "Resource": f"arn:aws:s3:::{BUCKET}/code/*"}
    role = _role(aws, "no-datasets", "sagemaker.amazonaws.com", listing, code_only)
    outcome = aws.job_runner.run(_job("denied-channel", role), job_arn="arn:job")
    assert outcome.status == "Failed"
    assert "AccessDenied" in outcome.failure_reason
    assert "is not authorized to perform: s3:GetObject" in outcome.failure_reason
    assert f"on resource: arn:aws:s3:::{BUCKET}/datasets/set/a.jsonl" in outcome.failure_reason
    assert "assumed-role/no-datasets/" in outcome.failure_reason


def test_a_role_sagemaker_may_not_assume_fails_the_job(aws):
    role = _role(aws, "for-lambda", "lambda.amazonaws.com", {"Effect": "Allow", "Action": "s3:*", "Resource": "*"})
    outcome = aws.job_runner.run(_job("untrusted-role", role), job_arn="arn:job")
    assert outcome.status == "Failed"
    assert "sagemaker.amazonaws.com cannot assume" in outcome.failure_reason


def _machine(aws: LocalAws, name: str, role_arn: str) -> str:
    definition = {
        "StartAt": "RecordModel",
        "States": {
            "RecordModel": {
                "Type": "Task",
                "Resource": "arn:aws:states:::aws-sdk:ssm:putParameter",
                "Parameters": {"Name": PARAMETER, "Value": "s3://model", "Type": "String", "Overwrite": True},
                "End": True,
            }
        },
    }
    sfn = aws.client("stepfunctions")
    return sfn.create_state_machine(name=name, definition=json.dumps(definition), roleArn=role_arn)["stateMachineArn"]


def _run(aws: LocalAws, machine: str) -> dict:
    sfn = aws.client("stepfunctions")
    execution = sfn.start_execution(stateMachineArn=machine)["executionArn"]
    for _ in range(100):
        described = sfn.describe_execution(executionArn=execution)
        if described["status"] != "RUNNING":
            return described
        time.sleep(0.05)
    raise AssertionError(f"{execution} still running")


def test_a_state_machine_calls_with_its_role_and_a_missing_grant_fails_naming_action_and_resource(aws):
    parameter_arn = f"arn:aws:ssm:{aws.region}:{ACCOUNT}:parameter{PARAMETER}"
    role = _role(
        aws, "workflow", "states.amazonaws.com", {"Effect": "Allow", "Action": "ssm:GetParameter", "Resource": "*"}
    )
    failed = _run(aws, _machine(aws, "without-grant", role))
    assert failed["status"] == "FAILED"
    assert "is not authorized to perform: ssm:PutParameter" in failed["cause"]
    assert f"on resource: {parameter_arn}" in failed["cause"]
    granted = {"Effect": "Allow", "Action": "ssm:PutParameter", "Resource": parameter_arn}
    aws.client("iam").put_role_policy(RoleName="workflow", PolicyName="record", PolicyDocument=_policy(granted))
    assert _run(aws, _machine(aws, "with-grant", role))["status"] == "SUCCEEDED"
    assert aws.iam.calls[-1]["policy"] == "record" and aws.iam.calls[-1]["resource"] == parameter_arn
