"""No job that did not complete is recorded: the dev Training and staging compile workflows on moto's interpreter,
with SageMaker's `.sync` answered by moto's DescribeTrainingJob of a job that ended as each test says
(tests/stacks/job_outcomes.py), e.g. Stopped / MaxRuntimeExceeded, as SageMaker ends a job past MaxRuntimeInSeconds.
"""

from __future__ import annotations

import json
import logging

import boto3
import pytest
from moto import mock_aws

from local.emulator.execution_patches import aws_sdk_answers_as_json
from tests.stacks.job_outcomes import (
    MAX_RUNTIME_EXCEEDED,
    deploy_state_machine,
    entered,
    job_outcomes,
    run_execution,
)

REGION = "us-east-1"


@pytest.fixture(scope="module")
def aws():
    logging.getLogger("moto").setLevel(logging.CRITICAL)
    aws_sdk_answers_as_json()  # aws-sdk results carry timestamps as AWS gives them (the registry lists versions)
    with mock_aws(config={"stepfunctions": {"execute_state_machine": True}}):
        names = ("s3", "sagemaker", "sns", "ssm", "stepfunctions")
        yield {name: boto3.client(name, region_name=REGION) for name in names}


def _run(aws, machine: str, bucket: str, name: str) -> tuple[dict, list[dict]]:
    key = "datasets/guanaco/train.jsonl"
    aws["s3"].put_object(Bucket=bucket, Key=key, Body=b'{"text": "a row"}\n')  # the registry lists its versions
    execution_input = {"train_data": f"s3://{bucket}/{key}", "hyperparameters": {}}
    return run_execution(aws, machine, execution_input, name)


def _value(aws, name: str) -> str:
    return aws["ssm"].get_parameter(Name=name)["Parameter"]["Value"]


@pytest.fixture(scope="module")
def dev(aws, templates):
    return deploy_state_machine(aws, templates["dev"], "Training")


@pytest.fixture(scope="module")
def staging(aws, templates):
    return deploy_state_machine(aws, templates["staging"], "Training")


def test_a_completed_job_is_recorded(aws, dev):
    machine, names = dev
    with job_outcomes({}):
        execution, events = _run(aws, machine, names["bucket"], "completed")
    assert execution["status"] == "SUCCEEDED", (execution.get("error"), execution.get("cause"), entered(events))
    states = entered(events)
    assert states[states.index("Train") :][:3] == ["Train", "TrainCompleted", "DescribeRun"]
    assert states[states.index("RegisterModel") :] == [
        "RegisterModel",
        "GatePassed",
        "RecordModel",
        "CompileForNeuron",  # dev's LMI partition (tests/stacks/training/test_partition_step.py)
        "CompileCompleted",
        "RecordCompiledModel",
        "ReadCompiledFacts",
        "RegisterCompiledModel",
        "Done",
    ]
    assert _value(aws, names["parameters"][0]).endswith("/output/model/")


def test_a_job_stopped_at_max_runtime_is_not_recorded(aws, dev):
    machine, names = dev
    aws["ssm"].put_parameter(Name=names["parameters"][0], Value="none", Type="String", Overwrite=True)
    with job_outcomes({"-0-0": MAX_RUNTIME_EXCEEDED}):
        execution, events = _run(aws, machine, names["bucket"], "max-runtime")
    states = entered(events)
    assert states[-6:] == ["Train", "TrainCompleted", "TrainNotCompleted", "Notify", "ErrorName", "Failed"]
    assert "RecordModel" not in states
    assert execution["status"] == "FAILED" and execution["error"] == "JobNotCompleted"
    assert execution["cause"].endswith("-0-0 ended Stopped (MaxRuntimeExceeded), not Completed: nothing recorded")
    assert _value(aws, names["parameters"][0]) == "none"
    (published,) = [
        json.loads(e["taskScheduledEventDetails"]["parameters"])["Message"]
        for e in events
        if e["type"] == "TaskScheduled" and e["taskScheduledEventDetails"]["resource"] == "publish"
    ]
    assert published["error"] == {"Error": "JobNotCompleted", "Cause": execution["cause"]}


def test_a_compile_job_stopped_at_max_runtime_is_not_recorded(aws, staging):
    machine, names = staging
    with job_outcomes({"-n-": MAX_RUNTIME_EXCEEDED}):
        execution, events = _run(aws, machine, names["bucket"], "compile-max-runtime")
    states = entered(events)
    assert states[-7:] == [
        "RecordModel",
        "CompileForNeuron",
        "CompileCompleted",
        "CompileNotCompleted",
        "Notify",
        "ErrorName",
        "Failed",
    ]
    assert "RecordCompiledModel" not in states
    assert execution["error"] == "JobNotCompleted" and "Stopped (MaxRuntimeExceeded)" in execution["cause"]
    model, compiled = sorted(names["parameters"], key=lambda n: "compiled" in n)
    assert _value(aws, model).endswith("/output/model/") and _value(aws, compiled) == "none"
