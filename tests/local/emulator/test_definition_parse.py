"""The interpreter parses each state machine definition once per process, and every caller still gets
components of its own (an execution's evaluation never touches another's)."""

from __future__ import annotations

import json

import boto3
import pytest
from botocore.exceptions import ClientError
from moto import mock_aws
from moto.stepfunctions.parser.asl.parse.asl_parser import AmazonStateLanguageParser

from local.emulator.execution_patches import definitions_parsed_once
from tests.stacks.job_outcomes import ended_execution

DEFINITION = json.dumps(
    {
        "StartAt": "Split",
        "States": {
            "Split": {
                "Type": "Pass",
                "Parameters": {"parts.$": "States.StringSplit($.name, '-')"},
                "Next": "Enough",
            },
            "Enough": {
                "Type": "Choice",
                "Choices": [{"Variable": "$.parts[1]", "StringEquals": "b", "Next": "Done"}],
                "Default": "Refused",
            },
            "Refused": {"Type": "Fail", "Error": "Refused"},
            "Done": {"Type": "Succeed"},
        },
    }
)


@pytest.fixture(autouse=True)
def patched():
    definitions_parsed_once()


def test_a_definition_parsed_twice_shares_its_syntax_tree_and_not_its_components():
    program, tree = AmazonStateLanguageParser.parse(DEFINITION)
    again, same_tree = AmazonStateLanguageParser.parse(DEFINITION)
    assert same_tree is tree
    assert again is not program and again.states is not program.states


def test_an_invalid_definition_is_refused_on_every_create():
    with mock_aws(config={"stepfunctions": {"execute_state_machine": True}}):
        sfn = boto3.client("stepfunctions", region_name="us-east-1")
        role = "arn:aws:iam::123456789012:role/machine"
        for attempt in range(2):
            with pytest.raises(ClientError, match="ASLParserException"):
                sfn.create_state_machine(name=f"broken-{attempt}", definition='{"StartAt": 1}', roleArn=role)


def test_executions_of_one_machine_each_follow_their_own_input():
    with mock_aws(config={"stepfunctions": {"execute_state_machine": True}}):
        sfn = boto3.client("stepfunctions", region_name="us-east-1")
        arn = sfn.create_state_machine(
            name="split", definition=DEFINITION, roleArn="arn:aws:iam::123456789012:role/machine"
        )["stateMachineArn"]
        started = {
            name: sfn.start_execution(stateMachineArn=arn, name=name, input=json.dumps({"name": name}))["executionArn"]
            for name in ("a-b-c", "a-x-c", "q-b")
        }
        statuses = {name: ended_execution(sfn, execution)["status"] for name, execution in started.items()}
    assert statuses == {"a-b-c": "SUCCEEDED", "a-x-c": "FAILED", "q-b": "SUCCEEDED"}
