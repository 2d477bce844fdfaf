"""The EventBridge rule that starts one training run per dataset: on its completion marker, not on each shard.

A dataset is the folder `datasets/<name>/` (any number of shards); the uploader writes `datasets/<name>/_READY`
after the last one. Matching every object under datasets/ started one run per shard (and per eval file).
"""

from __future__ import annotations

from aws_cdk import aws_events as events
from aws_cdk import aws_events_targets as targets
from aws_cdk import aws_iam as iam
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_stepfunctions as sfn
from constructs import Construct

from ..shared.bucket_layout import DATASET_READY_MARKER, DATASETS_PREFIX
from .outcomes import MARKER_VERSION_KEY

# EventBridge's `*` also matches '/': a deeper marker starts a run too, which ValidateInput refuses with a cause.
READY_MARKER_PATTERN = f"{DATASETS_PREFIX}*/{DATASET_READY_MARKER}"


def dataset_upload_rule(scope: Construct, *, bucket: s3.IBucket, state_machine: sfn.IStateMachine) -> events.Rule:
    """A `datasets/<name>/_READY` marker starts a run with the marker as training data (the same input shape as
    tools/start_training.py: see stacks/training/execution_input.py; the state machine turns the marker into
    its folder) and the marker's S3 version id; the rule's role may only start this machine."""
    rule = events.Rule(
        scope,
        "DatasetUploaded",
        description="Start QLoRA training once per dataset: on datasets/<name>/_READY in the artifact bucket",
        event_pattern=events.EventPattern(
            source=["aws.s3"],
            detail_type=["Object Created"],
            detail={"bucket": {"name": [bucket.bucket_name]}, "object": {"key": [{"wildcard": READY_MARKER_PATTERN}]}},
        ),
    )
    events_role = iam.Role(
        scope,
        "RuleRole",
        assumed_by=iam.ServicePrincipal("events.amazonaws.com"),
        description="EventBridge: start the training state machine on dataset completion markers",
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
            input=events.RuleTargetInput.from_object(
                {
                    "train_data": "s3://"
                    + events.EventField.from_path("$.detail.bucket.name")
                    + "/"
                    + events.EventField.from_path("$.detail.object.key"),
                    "hyperparameters": {},
                    # The marker's S3 version (the bucket is versioned): the registry's lineage names it.
                    MARKER_VERSION_KEY: events.EventField.from_path("$.detail.object.version-id"),
                }
            ),
        )
    )
    return rule
