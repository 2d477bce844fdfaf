"""The base and pruned encoder endpoints: the HF PyTorch inference image behind the generic SageMakerEndpoint."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping

from aws_cdk import Stack
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_sns as sns
from constructs import Construct

from ..config.endpoint import DataCaptureConfig
from ..config.pruning import EncoderEndpointConfig
from ..shared.acknowledgments import acknowledge_wildcards
from ..shared.container_images import ContainerImages
from ..shared.endpoint_runtime import endpoint_runtime_statements, endpoint_runtime_wildcards
from ..shared.sagemaker_endpoint import (
    ContainerSpec,
    SageMakerEndpoint,
    VariantSpec,
    allow_alarm_notifications,
)


def encoder_endpoints(
    scope: Construct,
    endpoints: Mapping[str, EncoderEndpointConfig],
    *,
    environment_name: str,
    bucket: s3.IBucket,
    key: kms.IKey,
    images: ContainerImages,
    topic: sns.ITopic,
) -> dict[str, SageMakerEndpoint]:
    """One endpoint per entry of `endpoints` ({"Base": ..., "Pruned": ...}), sharing one execution role;
    `environment_name`: `<app>-<env>`, which the role's description starts with."""
    role, policy = _execution_role(
        scope,
        description=f"{environment_name}: base and pruned encoder endpoints",
        model_arns=sorted({bucket.arn_for_objects(cfg.model_key) for cfg in endpoints.values()}),
        image_arns=sorted({images.repository_arn(cfg.image) for cfg in endpoints.values()}),
        key=key,
    )
    allow_alarm_notifications(key)
    built = {}
    for name, cfg in endpoints.items():
        environment = {"SAGEMAKER_PROGRAM": "inference.py", "SAGEMAKER_CONTAINER_LOG_LEVEL": "20"}
        if cfg.model_server_workers:
            environment["SAGEMAKER_MODEL_SERVER_WORKERS"] = str(cfg.model_server_workers)
        revision = hashlib.sha256("\n".join((cfg.model_key, cfg.image, cfg.instance_type)).encode()).hexdigest()
        built[name] = SageMakerEndpoint(
            scope,
            name,
            container=ContainerSpec(
                image_uri=images.uri(cfg.image),
                environment=environment,
                model_data_url=bucket.s3_url_for_object(cfg.model_key),
            ),
            variant=VariantSpec(
                instance_type=cfg.instance_type,
                initial_instance_count=cfg.initial_instance_count,
                instance_vcpus=cfg.vcpus,
                volume_size_gb=cfg.volume_size_gb,
                startup_health_check_timeout_seconds=cfg.container_startup_health_check_timeout_seconds,
                model_data_download_timeout_seconds=cfg.model_data_download_timeout_seconds,
            ),
            execution_role=role,
            role_policies=[policy],
            revision=revision[:12],
            kms_key=key,
            rollout=cfg.rollout,
            autoscaling=cfg.autoscaling,
            alarms=cfg.alarms,
            alarm_topic=topic,
            data_capture=DataCaptureConfig(enabled=False),
            data_capture_destination=None,
        )
    return built


def _execution_role(
    scope: Construct, *, description: str, model_arns: list[str], image_arns: list[str], key: kms.IKey
) -> tuple[iam.Role, iam.ManagedPolicy]:
    """Reads only the pinned model.tar.gz files, pulls only the inference images, writes endpoint logs."""
    role = iam.Role(
        scope,
        "EndpointRole",
        assumed_by=iam.ServicePrincipal("sagemaker.amazonaws.com"),
        description=description,
    )
    policy = iam.ManagedPolicy(
        scope,
        "EndpointPolicy",
        roles=[role],
        description="Read the two pinned model.tar.gz, pull the HF inference image, write endpoint logs",
        statements=[
            iam.PolicyStatement(
                sid="ReadPinnedModels",
                actions=["s3:GetObject"],
                resources=model_arns,
            ),
            iam.PolicyStatement(sid="DecryptWithDataKey", actions=["kms:Decrypt"], resources=[key.key_arn]),
            iam.PolicyStatement(
                sid="PullInferenceImage",
                actions=["ecr:BatchCheckLayerAvailability", "ecr:BatchGetImage", "ecr:GetDownloadUrlForLayer"],
                resources=image_arns,
            ),
            *endpoint_runtime_statements(Stack.of(scope)),
        ],
    )
    acknowledge_wildcards(policy, endpoint_runtime_wildcards(Stack.of(scope)))
    return role, policy
