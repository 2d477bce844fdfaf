"""A job step owns both sides of its access: the execution role comes from what the request reads and writes, the
state machine's statements from the steps its definition reaches, and a fixed role short of either is refused.

The actions are IAM's for what SageMaker does with each location (Service Authorization Reference: a channel is
downloaded with s3:GetObject after s3:ListBucket, the output uploaded with s3:PutObject), as aws-cdk's
SageMakerCreateTrainingJob grants them through `bind(this, {forReading: true})` on an S3Location.
"""

from __future__ import annotations

from dataclasses import replace

import pytest
from aws_cdk import App, Stack
from aws_cdk import aws_kms as kms
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_stepfunctions as sfn

from stacks.shared.job_access import JobAccess, JobAccessError, JobImage, Location, S3Scope
from stacks.shared.job_request import Ref, S3Channel, TrainingJobRequest
from stacks.shared.job_role import SageMakerJobRole
from stacks.shared.sagemaker_job_step import TRAINING_JOB, JobOutput, SageMakerJobStep
from stacks.shared.state_grants import definition_grants

FIX = "give the step a role that allows it, or a request without a role so the step derives one"


class _Parts:
    """A stack with a bucket, a key and a request reading datasets/ and writing models/ (no role yet)."""

    def __init__(self) -> None:
        self.stack = Stack(App(), "Jobs")
        self.bucket = s3.Bucket(self.stack, "Bucket")
        self.notify = sfn.Pass(self.stack, "Notify")
        self.datasets = self.scope("datasets/")
        self.models = self.scope("models/")
        self.request = TrainingJobRequest(
            job_name=Ref("States.Format('p-{}', $.run.name)"),
            image=JobImage("image", "arn:aws:ecr:us-east-1:123456789012:repository/image"),
            instance_type="ml.g5.xlarge",
            instance_count=1,
            volume_size_gb=50,
            kms_key_arn=kms.Key(self.stack, "Key").key_arn,
            output_s3_uri="s3://bucket/models/",
            output_scope=self.models,
            hyperparameters=None,
            channels=[S3Channel("training", Ref("$.train_data"), self.datasets)],
            max_runtime_seconds=3600,
            metric_definitions=(),
        )

    def scope(self, prefix: str) -> S3Scope:
        return S3Scope.under(self.bucket, prefix, f"every object under {prefix}")

    def step(self, construct_id: str, request: TrainingJobRequest) -> SageMakerJobStep:
        return SageMakerJobStep(
            self.stack,
            construct_id,
            kind=TRAINING_JOB,
            request=request,
            output=JobOutput(f"$.{construct_id.lower()}"),
            name_prefix="p",
            notify=self.notify,
            completed_check=f"{construct_id}Completed",
        )

    def role(self, construct_id: str = "JobRole", fixed: JobAccess | None = None) -> SageMakerJobRole:
        return SageMakerJobRole(
            self.stack, construct_id, job_name_prefix="p", description="jobs", policy_description="jobs", fixed=fixed
        )

    def statements(self, role: SageMakerJobRole) -> dict[str, dict]:
        role.finish()
        document = self.stack.resolve(role.policy.document.to_json())
        return {s["Sid"]: s for s in document["Statement"]}

    def objects(self, *prefixes: str) -> list:
        return [self.stack.resolve(self.scope(p).objects) for p in prefixes]


def test_a_step_without_a_role_gets_one_that_reads_its_channels_and_writes_its_output():
    parts = _Parts()
    step = parts.step("Evaluate", parts.request)
    assert step.role.node.path == "Jobs/Evaluate/Role"
    statements = parts.statements(step.role)
    assert statements["ReadInputs"]["Action"] == "s3:GetObject"
    assert statements["ReadInputs"]["Resource"] == parts.objects("datasets/")[0]  # IAM's one-resource form
    assert statements["ListInputs"]["Condition"] == {"StringLike": {"s3:prefix": ["datasets/*"]}}
    assert statements["WriteOutputs"]["Action"] == ["s3:PutObject", "s3:AbortMultipartUpload"]
    assert statements["WriteOutputs"]["Resource"] == parts.objects("models/")[0]
    assert statements["PullTrainingImage"]["Resource"] == "arn:aws:ecr:us-east-1:123456789012:repository/image"
    rendered = parts.stack.resolve(step.requests["Evaluate"].to_asl())["RoleArn"]
    assert rendered == parts.stack.resolve(step.role.role_arn)


def test_a_shared_role_is_extended_by_each_step_that_names_it_in_the_bucket_layouts_order():
    parts = _Parts()
    role = parts.role()
    shared = replace(parts.request, role_arn=role.role_arn)
    evaluate = replace(shared, channels=[S3Channel("model", Ref("$.training.model_s3_uri"), parts.models)])
    parts.step("Evaluate", evaluate)  # built first: the order of the role's prefixes does not follow the steps'
    parts.step("Train", shared)
    assert parts.statements(role)["ReadInputs"]["Resource"] == parts.objects("datasets/", "models/")


def test_a_fixed_role_that_cannot_read_a_channel_refuses_the_step_in_one_line():
    parts = _Parts()
    held = parts.request.access
    role = parts.role("FixedRole", fixed=held)
    evaluate = replace(
        parts.request,
        role_arn=role.role_arn,
        channels=[S3Channel("model", Ref("$.training.model_s3_uri"), parts.models)],
    )
    with pytest.raises(JobAccessError) as refused:
        parts.step("Evaluate", evaluate)
    assert str(refused.value) == (
        "Jobs/Evaluate: its role Jobs/FixedRole lacks s3:GetObject on channel 'model' $.training.model_s3_uri "
        f"(under models/*); {FIX}"
    )


def test_a_fixed_role_that_cannot_write_the_output_refuses_the_step_in_one_line():
    parts = _Parts()
    checkpoints = parts.scope("checkpoints/")
    held = replace(parts.request.access, writes=(Location("output", "s3://bucket/checkpoints/", checkpoints),))
    role = parts.role("FixedRole", fixed=held)
    with pytest.raises(JobAccessError) as refused:
        parts.step("Train", replace(parts.request, role_arn=role.role_arn))
    assert str(refused.value) == (
        f"Jobs/Train: its role Jobs/FixedRole lacks s3:PutObject on output s3://bucket/models/ (under models/*); {FIX}"
    )


def test_a_fixed_role_holding_a_wider_prefix_runs_a_step_reading_under_it():
    parts = _Parts()
    held = replace(parts.request.access, reads=(Location("models", "s3://bucket/models/", parts.models),))
    role = parts.role("FixedRole", fixed=held)
    narrow = S3Channel("model", "s3://bucket/models/merged/", parts.scope("models/merged/"))
    step = parts.step("Evaluate", replace(parts.request, role_arn=role.role_arn, channels=[narrow]))
    assert step.role is role


def test_the_state_machine_is_granted_the_steps_its_definition_reaches_and_no_other():
    parts = _Parts()
    reached = parts.step("Train", parts.request)
    parts.step("Orphan", parts.request)  # built, never chained: its role is not passed
    start = sfn.Pass(parts.stack, "Start")
    start.next(reached.start)
    grants = definition_grants(start)
    passed = [parts.stack.resolve(s.to_statement_json()) for s in grants.statements if s.sid == "PassJobRoles"]
    assert [p["Resource"] for p in passed] == [parts.stack.resolve(reached.role.role_arn)]
