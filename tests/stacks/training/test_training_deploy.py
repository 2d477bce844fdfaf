"""Data + Training from the synthesized dev templates into the local emulator (moto on 127.0.0.1).

Emulation, not AWS: moto creates the resources and records executions but does not run `.sync` tasks.
"""

from __future__ import annotations

import json

import pytest

from local.emulator import LocalAws
from tools import start_training

DATA, TRAINING = "llm-inf2-dev-Data", "llm-inf2-dev-Training"


@pytest.fixture(scope="module")
def deployed(assemblies):
    with LocalAws.start() as aws:
        aws.bootstrap()
        outputs = aws.deploy(assemblies["dev"].directory, [DATA, TRAINING])
        yield aws, outputs


def test_both_stacks_reach_create_complete(deployed):
    aws, outputs = deployed
    assert aws.status(DATA) == "CREATE_COMPLETE"
    assert aws.status(TRAINING) == "CREATE_COMPLETE"
    assert {"StateMachineArn", "FailureTopicArn", "ModelParameterName"} <= set(outputs[TRAINING])


def test_training_code_asset_was_published(deployed):
    aws, _ = deployed
    keys = [o["Key"] for o in aws.client("s3").list_objects_v2(Bucket=aws.assets_bucket).get("Contents", [])]
    assert any(k.endswith(".gz") for k in keys)


def test_state_machine_is_the_synthesized_one(deployed):
    aws, outputs = deployed
    machine = aws.client("stepfunctions").describe_state_machine(stateMachineArn=outputs[TRAINING]["StateMachineArn"])
    states = json.loads(machine["definition"])["States"]
    assert states["Train"]["Resource"] == "arn:aws:states:::sagemaker:createTrainingJob.sync"
    bucket = outputs[DATA]["ArtifactBucketName"]
    assert states["Train"]["Parameters"]["OutputDataConfig"]["S3OutputPath"] == f"s3://{bucket}/models/"
    role = machine["roleArn"].rsplit("/", 1)[1]
    attached = aws.client("iam").list_attached_role_policies(RoleName=role)["AttachedPolicies"]
    assert attached and all(":aws:policy/" not in p["PolicyArn"] for p in attached)


def test_rule_topic_parameter_and_roles_exist(deployed):
    aws, outputs = deployed
    machine_arn = outputs[TRAINING]["StateMachineArn"]
    events = aws.client("events")
    rules = [r for r in events.list_rules()["Rules"] if "DatasetUploaded" in r["Name"]]
    assert len(rules) == 1
    (target,) = events.list_targets_by_rule(Rule=rules[0]["Name"])["Targets"]
    assert target["Arn"] == machine_arn and target["RoleArn"]
    pattern = json.loads(rules[0]["EventPattern"])
    assert pattern["detail"]["bucket"]["name"] == [outputs[DATA]["ArtifactBucketName"]]
    topic = aws.client("sns").get_topic_attributes(TopicArn=outputs[TRAINING]["FailureTopicArn"])["Attributes"]
    assert topic["KmsMasterKeyId"] == outputs[DATA]["ArtifactKeyArn"]
    parameter = aws.client("ssm").get_parameter(Name=outputs[TRAINING]["ModelParameterName"])["Parameter"]
    assert parameter["Value"] == "none"
    role = aws.client("iam").get_role(RoleName=outputs[TRAINING]["TrainingRoleArn"].rsplit("/", 1)[1])["Role"]
    assert role["AssumeRolePolicyDocument"]["Statement"][0]["Principal"] == {"Service": "sagemaker.amazonaws.com"}


def test_manual_start_validates_before_starting(deployed, monkeypatch, capsys):
    aws, outputs = deployed
    for name, value in {
        "AWS_ENDPOINT_URL": aws.endpoint_url,
        **aws.credentials_environment(),  # a person's keys: the emulator enforces IAM
        "AWS_DEFAULT_REGION": aws.region,
    }.items():
        monkeypatch.setenv(name, value)
    sfn = aws.client("stepfunctions")
    machine_arn = outputs[TRAINING]["StateMachineArn"]

    assert start_training.main(["--data", "s3://some-other-bucket/datasets/a.jsonl"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "is not the artifact bucket" in err[0]
    assert sfn.list_executions(stateMachineArn=machine_arn)["executions"] == []

    data = f"s3://{outputs[DATA]['ArtifactBucketName']}/datasets/guanaco/train.jsonl"
    assert start_training.main(["--data", data, "--set", "lora_r=16", "--name", "manual-1"]) == 0
    arn = capsys.readouterr().out.strip()
    execution = sfn.describe_execution(executionArn=arn)
    assert execution["name"] == "manual-1"
    assert json.loads(execution["input"]) == {"train_data": data, "hyperparameters": {"lora_r": "16"}}
