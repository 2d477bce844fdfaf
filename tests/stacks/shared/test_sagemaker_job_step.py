"""SageMakerJobStep grants what aws-cdk-lib's own task grants for the same integration, and renders one job state.

The reference is aws-cdk-lib's SageMakerCreateTrainingJob (RUN_JOB) synthesized in a throwaway stack
(tests/stacks/test_task_grants.py); the tuning job's `.sync` has no L2 task, so its set is the one the AWS Step
Functions developer guide generates. Beyond those, a step may use the data key its request names (kms:CreateGrant
for AWS resources, kms:DescribeKey), which CreateTrainingJob checks for VolumeKmsKeyId and KmsKeyId.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import pytest
from aws_cdk import App, Stack
from aws_cdk import aws_kms as kms
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_stepfunctions as sfn

from stacks.shared.job_access import JobAccess, JobImage, S3Scope
from stacks.shared.job_request import Ref, S3Channel, TrainingJobRequest
from stacks.shared.job_role import SageMakerJobRole
from stacks.shared.sagemaker_job_step import (
    TRAINING_JOB,
    TUNING_JOB,
    JobOutput,
    JobVariant,
    SageMakerJobStep,
    job_step_statements,
)
from tests.stacks.test_task_grants import TUNING_SYNC, cdk_grants

DATA_KEY_ACTIONS = {"kms:creategrant", "kms:describekey"}


@dataclass(frozen=True)
class _Tuning:
    """The smallest tuning request: the step reads its role, key, access and Parameters."""

    trial: TrainingJobRequest

    @property
    def role_arn(self) -> str | None:
        return self.trial.role_arn

    @property
    def kms_key_arn(self) -> str:
        return self.trial.kms_key_arn

    @property
    def access(self) -> JobAccess:
        return self.trial.access

    def with_role(self, role_arn: str) -> _Tuning:
        return replace(self, trial=self.trial.with_role(role_arn))

    def to_asl(self) -> dict:
        return {"HyperParameterTuningJobName.$": "$.run.name"}


def _stack() -> tuple[Stack, TrainingJobRequest, sfn.Pass]:
    stack = Stack(App(), "Steps")
    role = SageMakerJobRole(stack, "JobRole", job_name_prefix="p", description="jobs", policy_description="jobs")
    key = kms.Key(stack, "Key")
    bucket = s3.Bucket(stack, "Bucket")
    request = TrainingJobRequest(
        job_name=Ref("States.Format('p-{}', $.run.name)"),
        role_arn=role.role_arn,
        image=JobImage("image", "arn:aws:ecr:us-east-1:123456789012:repository/image"),
        instance_type="ml.g5.xlarge",
        instance_count=1,
        volume_size_gb=50,
        kms_key_arn=key.key_arn,
        output_s3_uri="s3://bucket/models/",
        output_scope=S3Scope.under(bucket, "models/", "job names are generated per execution"),
        hyperparameters=None,
        channels=[S3Channel("training", Ref("$.train_data"), S3Scope.under(bucket, "datasets/", "chosen per run"))],
        max_runtime_seconds=3600,
        metric_definitions=(),
        tags={"project": "x"},
    )
    notify = sfn.Pass(stack, "Notify")
    return stack, request, notify


def _step(stack: Stack, construct_id: str, request, notify, **kwargs) -> SageMakerJobStep:
    props = {
        "kind": TRAINING_JOB,
        "output": JobOutput(f"$.{construct_id.lower()}"),
        "name_prefix": "p",
        "notify": notify,
        "completed_check": f"{construct_id}Completed",
    }
    return SageMakerJobStep(stack, construct_id, request=request, **{**props, **kwargs})


def _actions(stack: Stack, steps) -> set[str]:
    found = set()
    for statement in job_step_statements(stack, steps):
        actions = stack.resolve(statement.to_statement_json())["Action"]
        found |= {a.lower() for a in ([actions] if isinstance(actions, str) else actions)}
    return found


def test_a_training_step_grants_what_cdks_training_task_grants_and_the_data_key():
    stack, request, notify = _stack()
    step = _step(stack, "Train", request, notify)
    assert _actions(stack, [step]) == cdk_grants()["sagemaker:createTrainingJob.sync"] | DATA_KEY_ACTIONS


def test_a_tuning_step_grants_what_the_developer_guide_lists_and_tags_its_jobs():
    stack, request, notify = _stack()
    step = _step(stack, "Tune", _Tuning(request), notify, kind=TUNING_JOB)
    assert _actions(stack, [step]) == TUNING_SYNC | {"sagemaker:addtags"} | DATA_KEY_ACTIONS


def test_steps_share_one_statement_per_kind_and_pass_each_role_once():
    stack, request, notify = _stack()
    steps = [_step(stack, "Train", request, notify), _step(stack, "Export", request, notify)]
    statements = [stack.resolve(s.to_statement_json()) for s in job_step_statements(stack, steps)]
    assert [s["Sid"] for s in statements] == [
        "OwnTrainingJobs",
        "PassJobRoles",
        "SyncRules",
        "VolumeKeyGrant",
        "DescribeDataKey",
    ]
    assert statements[1]["Resource"] == stack.resolve(request.role_arn)


def test_a_step_renders_its_request_result_retries_catch_and_completed_check():
    stack, request, notify = _stack()
    step = _step(stack, "Train", request, notify, values={"model_s3_uri.$": "$.ModelArtifacts.S3ModelArtifacts"})
    step.then(sfn.Pass(stack, "Next"))
    graph = stack.resolve(sfn.StateGraph(step.start, "steps").to_graph_json())["States"]
    train = graph["Train"]
    assert train["Resource"] == {
        "Fn::Join": ["", ["arn:", {"Ref": "AWS::Partition"}, ":states:::sagemaker:createTrainingJob.sync"]]
    }
    assert train["Parameters"]["TrainingJobName.$"] == "States.Format('p-{}', $.run.name)"
    assert train["ResultSelector"] == {
        "job_name.$": "$.TrainingJobName",
        "status.$": "$.TrainingJobStatus",
        "secondary_status.$": "$.SecondaryStatus",
        "model_s3_uri.$": "$.ModelArtifacts.S3ModelArtifacts",
    }
    assert train["ResultPath"] == "$.train"
    assert train["Retry"][0]["MaxAttempts"] == 4 and "SageMaker.ThrottlingException" in train["Retry"][0]["ErrorEquals"]
    assert train["Catch"] == [{"ErrorEquals": ["States.ALL"], "ResultPath": "$.error", "Next": "Notify"}]
    assert graph["TrainCompleted"]["Choices"] == [
        {"Variable": "$.train.status", "StringEquals": "Completed", "Next": "Next"}
    ]
    assert graph["TrainCompleted"]["Default"] == "TrainNotCompleted"


def test_a_variant_without_a_chooser_is_refused():
    stack, request, notify = _stack()
    variant = JobVariant("TrainWithEval", sfn.Condition.is_present("$.eval_data"), request)
    with pytest.raises(ValueError, match=r"^Train: a variant needs a chooser state, and a chooser a variant$"):
        _step(stack, "Train", request, notify, variant=variant)


def test_two_name_prefixes_for_one_job_kind_are_refused():
    stack, request, notify = _stack()
    steps = [_step(stack, "Train", request, notify), _step(stack, "Export", request, notify, name_prefix="q")]
    with pytest.raises(ValueError, match=r"^Steps/Export: one job name prefix per job kind and state machine$"):
        job_step_statements(stack, steps)


def test_a_result_path_outside_the_state_is_refused():
    with pytest.raises(ValueError, match=r"^a result path is a JSONPath under \$: 'training'$"):
        JobOutput("training")
