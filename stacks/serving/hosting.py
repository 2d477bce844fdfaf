"""The endpoint resources both LLM backends share: one SageMakerEndpoint sized and guarded by the serving config."""

from __future__ import annotations

from collections.abc import Sequence

from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_sns as sns
from constructs import Construct, IDependable

from ..config.serving import ServingConfig
from ..shared.sagemaker_endpoint import ContainerSpec, SageMakerEndpoint, VariantSpec


def llm_hosting(
    scope: Construct,
    *,
    serving: ServingConfig,
    container: ContainerSpec,
    revision: str,
    execution_role: iam.IRole,
    role_policies: Sequence[IDependable],
    kms_key: kms.IKey,
    alarm_topic: sns.ITopic,
    data_capture_destination: str | None,
    inference_ami_version: str | None = None,
) -> SageMakerEndpoint:
    """`Hosting` under `scope` for either backend's container: the same id, so switching backends (or promoting
    a model) replaces Model and EndpointConfig and updates the same Endpoint."""
    return SageMakerEndpoint(
        scope,
        "Hosting",
        container=container,
        variant=VariantSpec(
            instance_type=serving.instance_type,
            initial_instance_count=serving.initial_instance_count,
            instance_vcpus=serving.inf2.vcpus,
            volume_size_gb=serving.volume_size_gb,
            startup_health_check_timeout_seconds=serving.container_startup_health_check_timeout_seconds,
            model_data_download_timeout_seconds=serving.model_data_download_timeout_seconds,
            inference_ami_version=inference_ami_version,
        ),
        execution_role=execution_role,
        role_policies=role_policies,
        revision=revision,
        kms_key=kms_key,
        rollout=serving.rollout,
        autoscaling=serving.autoscaling,
        alarms=serving.alarms,
        alarm_topic=alarm_topic,
        data_capture=serving.data_capture,
        data_capture_destination=data_capture_destination,
    )
