"""What every LLM backend's endpoint shares: the props the Serving stack hands it, and one SageMakerEndpoint sized
and guarded by the serving config."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_sns as sns
from constructs import Construct, IDependable

from ..config.serving import ServingConfig
from ..shared.inference_component import ComponentSpec
from ..shared.placement import Placement
from ..shared.sagemaker_endpoint import ContainerSpec, SageMakerEndpoint, VariantSpec


@dataclass(frozen=True)
class EndpointProps:
    """The Serving stack's hand-off to a backend's construct (`Endpoint(scope, id, props=...)`, in
    stacks/serving/backends/<name>/endpoint.py), which sets `hosting` and `model_asset` (a tarball or None)."""

    serving: ServingConfig
    image_uri: str
    model_uri: str  # the pinned model prefix
    compiled_graph_uri: str | None  # serving.compiled_graph_prefix's URI (only LMI NeuronX accepts one)
    execution_role: iam.IRole
    role_policies: Sequence[IDependable]
    kms_key: kms.IKey
    alarm_topic: sns.ITopic
    data_capture_destination: str | None
    isolated_placement: Placement | None = None  # isolated mode: the model's subnets and security groups


def llm_hosting(
    scope: Construct,
    props: EndpointProps,
    *,
    container: ContainerSpec,
    revision: str,
    inference_ami_version: str | None = None,
) -> SageMakerEndpoint:
    """`Hosting` under `scope` for either backend's container: the same id, so switching backends (or promoting
    a model) replaces Model and EndpointConfig and updates the same Endpoint. In isolated mode the container
    runs in `props.isolated_placement`'s subnets and security groups, whatever the backend. With
    serving.scale_to_zero on, the model is an inference component sized from the instance type and TP degree."""
    serving, placement = props.serving, props.isolated_placement
    if placement is not None:
        container = replace(
            container, vpc_subnet_ids=placement.subnet_ids, vpc_security_group_ids=placement.security_group_ids
        )
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
        execution_role=props.execution_role,
        role_policies=props.role_policies,
        revision=revision,
        kms_key=props.kms_key,
        rollout=serving.rollout,
        autoscaling=serving.autoscaling,
        alarms=serving.alarms,
        alarm_topic=props.alarm_topic,
        data_capture=serving.data_capture,
        data_capture_destination=props.data_capture_destination,
        component=_component(serving),
    )


def _component(serving: ServingConfig) -> ComponentSpec | None:
    size = serving.component
    if size is None:
        return None
    return ComponentSpec(
        accelerator_devices=size.accelerator_devices,
        min_memory_mb=size.min_memory_mb,
        copies_per_instance=size.copies_per_instance,
        idle_minutes=serving.scale_to_zero.idle_minutes,
    )
