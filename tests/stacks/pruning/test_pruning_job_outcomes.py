"""No pruning job that did not complete is used: the dev Pruning workflow on moto's interpreter, each `.sync` job
answered by moto's Describe* of a job that ended as each test says (tests/stacks/job_outcomes.py)."""

from __future__ import annotations

import logging

import boto3
import pytest
from moto import mock_aws

from local.emulator.execution_patches import execution_start_time_is_a_string
from tests.stacks.job_outcomes import MAX_RUNTIME_EXCEEDED, deploy_state_machine, entered, job_outcomes, run_execution


@pytest.fixture(scope="module")
def aws():
    logging.getLogger("moto").setLevel(logging.CRITICAL)
    execution_start_time_is_a_string()  # $$.Execution.StartTime as AWS gives it (StartTime splits it into digits)
    with mock_aws(config={"stepfunctions": {"execute_state_machine": True}}):
        yield {name: boto3.client(name, region_name="us-east-1") for name in ("sns", "ssm", "stepfunctions")}


@pytest.fixture(scope="module")
def pruning(aws, templates):
    machine, names = deploy_state_machine(aws, templates["dev"], "Pruning")
    (parameter,) = names["parameters"]
    return machine, {"train_data": f"s3://{names['bucket']}/pruning-datasets/nas/"}, parameter


def _value(aws, name: str) -> str:
    return aws["ssm"].get_parameter(Name=name)["Parameter"]["Value"]


def test_completed_jobs_reach_the_record(aws, pruning):
    machine, execution_input, parameter = pruning
    with job_outcomes({}):
        execution, events = run_execution(aws, machine, execution_input, "completed")
    assert execution["status"] == "SUCCEEDED", (execution.get("error"), execution.get("cause"))
    assert entered(events)[-5:] == ["SelectionCompleted", "Export", "ExportCompleted", "RecordModel", "Done"]
    assert _value(aws, parameter) != "none"
    aws["ssm"].put_parameter(Name=parameter, Value="none", Type="String", Overwrite=True)


@pytest.mark.parametrize(
    ("case", "outcomes", "tuning", "stops_at"),
    [
        ("supernet-max-runtime", {"-supernet-": MAX_RUNTIME_EXCEEDED}, {}, "SupernetNotCompleted"),
        ("export-max-runtime", {"-export-": MAX_RUNTIME_EXCEEDED}, {}, "ExportNotCompleted"),
        (
            "tuning-nothing-scored",
            {},
            {"": {"objectives": {"Succeeded": 0, "Pending": 0, "Failed": 3}}},
            "TuneNotCompleted",
        ),
        ("tuning-stopped", {}, {"": {"status": "Stopped"}}, "TuneNotCompleted"),
    ],
)
def test_a_job_that_did_not_complete_is_not_used(aws, pruning, case, outcomes, tuning, stops_at):
    machine, execution_input, parameter = pruning
    with job_outcomes(outcomes, tuning):
        execution, events = run_execution(aws, machine, execution_input, case)
    states = entered(events)
    assert states[-4:] == [stops_at, "Notify", "ErrorName", "Failed"], states
    assert "RecordModel" not in states and _value(aws, parameter) == "none"
    assert execution["error"] == "JobNotCompleted" and "nothing recorded" in execution["cause"]
