"""The synthesized Training rule and state machine, executed on moto: its EventBridge pattern matcher (the one
put_events uses; moto 5.2's TestEventPattern API answers nothing) and its ASL interpreter (it runs Pass, Choice
and intrinsics, and stops at `createTrainingJob.sync`).

The refusals end in Invalid* -> Notify (an SNS publish) -> Failed before any job; an accepted input reaches
the Train task (where moto stops) with the data and hyperparameters it would create the job with.
"""

from __future__ import annotations

import json
import logging
import re

import boto3
import pytest
from moto import mock_aws
from moto.events.models import EventPattern

from tests.stacks.job_outcomes import entered as _entered
from tests.stacks.job_outcomes import run_execution as _execute
from tests.stacks.training.test_training_stack import definition, resources_of

BUCKET = "llm-inf2-dev-data-artifactbucket-x1"
BUCKET_TOKEN = "<import:ExportsOutputRefArtifactBucket7410C9EF659B6D66>"
DATASETS = f"s3://{BUCKET}/datasets"
REGION = "us-east-1"


@pytest.fixture(scope="module")
def aws():
    logging.getLogger("moto").setLevel(logging.CRITICAL)  # the interpreter logs every missing optional path
    with mock_aws(config={"stepfunctions": {"execute_state_machine": True}}):
        yield {name: boto3.client(name, region_name=REGION) for name in ("sns", "stepfunctions")}


@pytest.fixture(scope="module")
def machine(aws, templates) -> str:
    topic = aws["sns"].create_topic(Name="training-failures")["TopicArn"]
    text = json.dumps(definition(templates["dev"]["Training"])).replace(BUCKET_TOKEN, BUCKET)
    text = re.sub(r"<[a-z]+:[^>]*>", "x", re.sub(r"<ref:FailureTopic[^>]*>", topic, text))
    return aws["stepfunctions"].create_state_machine(
        name="training", definition=text, roleArn="arn:aws:iam::123456789012:role/training-workflow"
    )["stateMachineArn"]


def _exited(events: list[dict], state: str) -> dict:
    (output,) = [
        json.loads(e["stateExitedEventDetails"]["output"])
        for e in events
        if e.get("stateExitedEventDetails", {}).get("name") == state
    ]
    return output


def _published(events: list[dict]) -> list[dict]:
    """SNS messages the execution published (scheduled and succeeded)."""
    scheduled = [e for e in events if e["type"] == "TaskScheduled"]
    assert all(e["taskScheduledEventDetails"]["resource"] == "publish" for e in scheduled)
    assert sum(e["type"] == "TaskSucceeded" for e in events) == len(scheduled)
    return [json.loads(e["taskScheduledEventDetails"]["parameters"])["Message"] for e in scheduled]


ACCEPTED = [
    ("marker", f"{DATASETS}/guanaco/_READY", f"{DATASETS}/guanaco/", True),
    ("file", f"{DATASETS}/guanaco/train.jsonl", f"{DATASETS}/guanaco/train.jsonl", False),
    ("folder", f"{DATASETS}/guanaco/", f"{DATASETS}/guanaco/", False),
    ("marker-like-name", f"{DATASETS}/guanaco/x_READY", f"{DATASETS}/guanaco/x_READY", False),
]


@pytest.mark.parametrize(("case", "train_data", "expected", "via_folder"), ACCEPTED, ids=[c[0] for c in ACCEPTED])
def test_accepted_input_reaches_the_training_job(aws, machine, case, train_data, expected, via_folder):
    overrides = {"lora_r": "16", "chat_template": 'say "a":1, then {"b":true}'}  # JSON-looking strings are fine
    execution, events = _execute(aws, machine, {"train_data": train_data, "hyperparameters": overrides}, case)
    entered = _entered(events)
    checks = [
        "ValidateInput",
        "ReadHyperparameters",
        "HyperparameterValues",
        "CountHyperparameters",
        "HyperparameterNames",
        "DatasetMarker",
    ]
    folder = ["DatasetFolder", "UseDatasetFolder"] if via_folder else []
    assert entered == [*checks, *folder, "Defaults", "Prepare", "EvalData"]
    job_input = _exited(events, "EvalData")  # what Train's Parameters read: $.train_data, $.run
    assert job_input["train_data"] == expected
    assert job_input["hyperparameters"] == overrides
    assert {**job_input["run"]["hyperparameters"], **overrides} == job_input["run"]["hyperparameters"]
    assert job_input["run"]["hyperparameters"]["sagemaker_program"] == "train.py"
    # moto stops at the job itself: the execution got as far as CreateTrainingJob.
    assert execution["status"] == "FAILED" and "createTrainingJob.sync" in execution["cause"]
    assert not [e for e in events if e["type"] == "TaskScheduled"], "nothing published"


REFUSED = [
    ("number", {"lora_r": 16}, "InvalidHyperparameterValue", "SageMaker passes strings only"),
    ("float", {"learning_rate": 1e-4}, "InvalidHyperparameterValue", "SageMaker passes strings only"),
    ("boolean", {"packing": True}, "InvalidHyperparameterValue", "write 16 as the string 16"),
    ("null", {"seed": None}, "InvalidHyperparameterValue", "must be an object of name: string value"),
    ("object", {"target_modules": {"q": "k"}}, "InvalidHyperparameterValue", 'got {"target_modules"'),
    ("array", {"target_modules": ["q_proj"]}, "InvalidHyperparameterValue", "must be an object"),
    ("not-an-object", ["lora_r", "16"], "InvalidHyperparameterValue", "must be an object"),
    ("unknown-name", {"lora_rank": "16"}, "UnknownHyperparameter", "a name train.py does not accept"),
    ("unknown-name-number", {"lora_r": "8", "epoch": 2}, "UnknownHyperparameter", 'got {"lora_r":"8","epoch":2}'),
    ("reserved-path", {"output_dir": "/tmp/x"}, "UnknownHyperparameter", "(it accepts chat_template, "),
    ("help", {"help": "true"}, "UnknownHyperparameter", "a name train.py does not accept"),
]


@pytest.mark.parametrize(("case", "overrides", "state", "cause"), REFUSED, ids=[c[0] for c in REFUSED])
def test_hyperparameters_sagemaker_or_train_py_would_refuse_fail_before_any_job(
    aws, machine, case, overrides, state, cause
):
    execution_input = {"train_data": f"{DATASETS}/guanaco/_READY", "hyperparameters": overrides}
    execution, events = _execute(aws, machine, execution_input, f"refused-{case}")
    entered = _entered(events)
    assert entered[-4:] == [state, "Notify", "ErrorName", "Failed"] and "Defaults" not in entered
    assert execution["status"] == "FAILED" and execution["error"] == "InvalidInput"
    assert cause in execution["cause"]
    (message,) = _published(events)
    assert message["error"] == {"Error": "InvalidInput", "Cause": execution["cause"]}
    assert message["input"] == execution_input


MARKERS = [
    ("deeper", f"{DATASETS}/guanaco/v2/_READY", "InvalidDatasetMarker"),
    ("directly-under-datasets", f"{DATASETS}/_READY", "InvalidDatasetMarker"),
    ("empty-name", f"{DATASETS}//_READY", "InvalidDatasetMarker"),
]


@pytest.mark.parametrize(("case", "train_data", "state"), MARKERS, ids=[c[0] for c in MARKERS])
def test_a_marker_that_is_not_one_folder_under_datasets_is_refused(aws, machine, case, train_data, state):
    execution, events = _execute(aws, machine, {"train_data": train_data, "hyperparameters": {}}, f"marker-{case}")
    assert _entered(events)[-5:] == ["DatasetMarker", state, "Notify", "ErrorName", "Failed"]
    assert execution["error"] == "InvalidInput"
    assert execution["cause"] == (
        f"a dataset completion marker must be {DATASETS}/<name>/_READY: one folder under datasets/ with the "
        f"shards beside the marker; got {train_data}"
    )
    assert len(_published(events)) == 1


SHAPES = [
    ("hyperparameters-string", {"train_data": f"{DATASETS}/a.jsonl", "hyperparameters": "lora_r=16"}),
    ("hyperparameters-null", {"train_data": f"{DATASETS}/a.jsonl", "hyperparameters": None}),
    (
        "eval-marker",
        {"train_data": f"{DATASETS}/a.jsonl", "hyperparameters": {}, "eval_data": f"{DATASETS}/guanaco/_READY"},
    ),
    ("pruning-data", {"train_data": f"s3://{BUCKET}/pruning-datasets/nas/", "hyperparameters": {}}),
]


@pytest.mark.parametrize(("case", "execution_input"), SHAPES, ids=[c[0] for c in SHAPES])
def test_the_wrong_shape_is_refused_by_validate_input(aws, machine, case, execution_input):
    execution, events = _execute(aws, machine, execution_input, f"shape-{case}")
    assert _entered(events) == ["ValidateInput", "InvalidInput", "Notify", "ErrorName", "Failed"]
    assert execution["error"] == "InvalidInput" and "see README, Training" in execution["cause"]
    assert len(_published(events)) == 1


def _rule_pattern(templates) -> EventPattern:
    (rule,) = resources_of(templates["dev"]["Training"], "AWS::Events::Rule").values()
    pattern = json.loads(json.dumps(rule["Properties"]["EventPattern"]))
    pattern["detail"]["bucket"]["name"] = [BUCKET]
    return EventPattern.load(json.dumps(pattern))


def _object_created(key: str, bucket: str = BUCKET) -> dict:
    return {
        "version": "0",
        "id": "1",
        "source": "aws.s3",
        "detail-type": "Object Created",
        "account": "123456789012",
        "time": "2026-12-01T12:00:00Z",
        "region": REGION,
        "resources": [f"arn:aws:s3:::{bucket}"],
        "detail": {"bucket": {"name": bucket}, "object": {"key": key, "size": 10}},
    }


def test_a_three_shard_dataset_matches_the_rule_once(templates):
    """The S3 events of one dataset's uploads (three shards, an eval file, then its marker) on the rule."""
    pattern = _rule_pattern(templates)
    uploads = [f"datasets/guanaco/train-{i}.jsonl" for i in range(3)] + [
        "datasets/guanaco/eval.jsonl",
        "datasets/guanaco/_READY",
    ]
    assert [key for key in uploads if pattern.matches_event(_object_created(key))] == ["datasets/guanaco/_READY"]


@pytest.mark.parametrize(
    ("key", "bucket", "matches"),
    [
        ("pruning-datasets/nas/train.jsonl", BUCKET, False),
        ("pruning-datasets/nas/_READY", BUCKET, False),
        ("models/run/_READY", BUCKET, False),
        ("datasets/guanaco/_READY", "another-bucket", False),
        ("datasets/_READY", BUCKET, False),
        ("datasets/guanaco/v2/_READY", BUCKET, True),  # EventBridge's * spans '/': DatasetMarker refuses it
    ],
)
def test_the_rule_ignores_other_prefixes_and_buckets(templates, key, bucket, matches):
    assert _rule_pattern(templates).matches_event(_object_created(key, bucket)) is matches
