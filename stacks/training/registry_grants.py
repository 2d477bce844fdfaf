"""What ModelRegistration's states need from their state machine's role, and why its wildcards are acceptable.

Register versions in this environment's group only, never as Approved (a person approves); read only the model
facts train.py writes into each model folder (and, for LMI, the compiled model's config.json); list the dataset's
versions under datasets/; write only the lineage manifests beside the models. DescribeRun's DescribeTrainingJob is
the job step's (OwnTrainingJobs); the data key's Decrypt (reading the facts) and GenerateDataKey (writing the
manifest) are the shell's EncryptNotification.
"""

from __future__ import annotations

from aws_cdk import Stack
from aws_cdk import aws_iam as iam

from ..shared.acknowledgments import Wildcard
from ..shared.bucket_layout import DATASETS_PREFIX, MODELS_PREFIX
from ..shared.state_grants import StateGrants

PENDING, REJECTED = "PendingManualApproval", "Rejected"

# Why the statements (by Sid) reach their first resource, a wildcard (cdk-nag's IAM5).
REGISTRY_WILDCARDS = {
    "RegisterModelPackages": "SageMaker numbers the versions of a package group itself; only versions in this "
    "environment's group, and only as PendingManualApproval or Rejected (condition sagemaker:ModelApprovalStatus).",
    "ReadModelFacts": "The facts train.py writes into each model folder, models/<job>/output/model/model_facts.json; "
    "job names are generated per execution, and the state machine can read no other object.",
    "ReadCompiledFacts": "The compiled model's own config.json (its shape and compiler), models/<job>/<shape folder>/"
    "<compile job>/output/model/; job names are generated per execution, and only that file of the folder is read.",
    "WriteLineage": "One lineage manifest per training job, models/<job>/lineage.json; job names are generated per "
    "execution, and the state machine can write no other object.",
}


def registry_grants(
    stack: Stack, *, bucket_arn: str, group_name: str, facts_file: str, lineage_file: str, compiled_folder: str | None
) -> StateGrants:
    """The statements, and a Wildcard for each that reaches one (its first resource)."""
    compiled = (
        []
        if compiled_folder is None
        else [
            iam.PolicyStatement(
                sid="ReadCompiledFacts",
                actions=["s3:GetObject"],
                resources=[f"{bucket_arn}/{MODELS_PREFIX}*/{compiled_folder}*/output/model/config.json"],
            )
        ]
    )
    statements = [
        iam.PolicyStatement(
            sid="RegisterModelPackages",
            actions=["sagemaker:CreateModelPackage"],
            resources=[
                stack.format_arn(service="sagemaker", resource="model-package", resource_name=f"{group_name}/*"),
                stack.format_arn(service="sagemaker", resource="model-package-group", resource_name=group_name),
            ],
            conditions={"StringEquals": {"sagemaker:ModelApprovalStatus": [PENDING, REJECTED]}},
        ),
        iam.PolicyStatement(
            sid="ReadModelFacts",
            actions=["s3:GetObject"],
            resources=[f"{bucket_arn}/{MODELS_PREFIX}*/output/model/{facts_file}"],
        ),
        *compiled,
        iam.PolicyStatement(
            sid="ListDatasetVersions",
            actions=["s3:ListBucketVersions"],
            resources=[bucket_arn],
            conditions={"StringLike": {"s3:prefix": [f"{DATASETS_PREFIX}*"]}},
        ),
        iam.PolicyStatement(
            sid="WriteLineage",
            actions=["s3:PutObject"],
            resources=[f"{bucket_arn}/{MODELS_PREFIX}*/{lineage_file}"],
        ),
    ]
    return StateGrants(
        statements,
        [Wildcard(s.resources[0], REGISTRY_WILDCARDS[s.sid]) for s in statements if s.sid in REGISTRY_WILDCARDS],
    )
