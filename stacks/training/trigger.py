"""The EventBridge rule that starts a training run when a dataset lands under datasets/."""

from __future__ import annotations

from aws_cdk import aws_events as events
from aws_cdk import aws_events_targets as targets
from aws_cdk import aws_iam as iam
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_stepfunctions as sfn
from constructs import Construct

from ..shared.bucket_layout import DATASETS_PREFIX


def dataset_upload_rule(scope: Construct, *, bucket: s3.IBucket, state_machine: sfn.IStateMachine) -> events.Rule:
    """Uploads under datasets/ start a run with the uploaded object as training data (the same input shape as
    tools/start_training.py: see stacks/training/execution_input.py); its role may only start this machine."""
    rule = events.Rule(
        scope,
        "DatasetUploaded",
        description="Start QLoRA training when a dataset lands under datasets/ in the artifact bucket",
        event_pattern=events.EventPattern(
            source=["aws.s3"],
            detail_type=["Object Created"],
            detail={"bucket": {"name": [bucket.bucket_name]}, "object": {"key": [{"prefix": DATASETS_PREFIX}]}},
        ),
    )
    events_role = iam.Role(
        scope,
        "RuleRole",
        assumed_by=iam.ServicePrincipal("events.amazonaws.com"),
        description="EventBridge: start the training state machine on dataset uploads",
    )
    iam.ManagedPolicy(
        scope,
        "RulePolicy",
        roles=[events_role],
        statements=[
            iam.PolicyStatement(actions=["states:StartExecution"], resources=[state_machine.state_machine_arn])
        ],
    )
    rule.add_target(
        targets.SfnStateMachine(
            state_machine,
            role=events_role.without_policy_updates(),
            input=events.RuleTargetInput.from_object({
                "train_data": "s3://"
                + events.EventField.from_path("$.detail.bucket.name")
                + "/"
                + events.EventField.from_path("$.detail.object.key"),
                "hyperparameters": {},
            }),
        )
    )
    return rule
