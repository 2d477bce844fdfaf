"""serving.scale_to_zero: host the served version as an inference component whose copies go to zero when idle.

SageMaker scales an endpoint to zero instances only when it hosts inference components ("Scale an endpoint to
zero instances", SageMaker developer guide): the variant's ManagedInstanceScaling.MinInstanceCount 0, the
component's copy count registered with Application Auto Scaling at minimum 0, and a step scaling policy on the
NoCapacityInvocationFailures alarm to come back. A component names what one copy needs (Inferentia2 devices, host
memory); `component_size` derives it from the instance type and the backend's TP degree, and refuses what cannot
fit. The first request after an idle spell waits for an instance, the image and the load of the compiled model
(minutes), so an environment whose deploy requires approval (production traffic) is refused unless allowed.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, NamedTuple

from . import aws_limits as aws
from .errors import ConfigError
from .inf2 import NEURON_CORES_PER_DEVICE, inferentia_devices
from .schema import setting

if TYPE_CHECKING:
    from .app_config import AppConfig
    from .serving import ServingConfig

MIB = 2**20
BYTES_PER_PARAMETER = 2  # the served weights are 16-bit (fp16 / bf16) on Neuron
MIN_MEMORY_MB = 128  # botocore: InferenceComponentComputeResourceRequirements.MinMemoryRequiredInMb min 128


@dataclass(frozen=True)
class ScaleToZeroConfig:
    """Whether the endpoint hosts an inference component that scales to zero copies, and after how long idle."""

    enabled: bool = setting(False, hint="true: an inference component whose copies scale to zero when idle")
    # One one-minute period of the idle alarm per minute (CloudWatch's day-long window for sub-hour periods).
    idle_minutes: int = setting(30, hint="minutes without invocations before the last copy stops", aws=aws.IDLE_MINUTES)
    allow_with_deploy_approval: bool = setting(
        False, hint="true: scale to zero also where deploy.approval is true (production traffic waits minutes)"
    )


class ComponentSize(NamedTuple):
    """What one copy of the served model asks of an instance, and how many copies one instance holds."""

    accelerator_devices: int
    min_memory_mb: int
    copies_per_instance: int


def weights_mb(billions: float) -> int:
    """The 16-bit weights in MiB: what a copy holds in host memory while it loads onto the devices."""
    return max(MIN_MEMORY_MB, math.ceil(billions * 1e9 * BYTES_PER_PARAMETER / MIB))


def component_size(serving: ServingConfig, source: str, path: str) -> ComponentSize:
    """The compute requirements of one copy on `serving.instance_type` (a ServingConfig), or one ConfigError line.

    A copy needs whole Inferentia2 devices for its TP degree (two NeuronCores each) and host memory for its
    16-bit weights; an instance holds as many copies as both allow."""
    instance = serving.inf2
    sharding = serving.spec.tensor_parallel(serving)
    field, tp = sharding if sharding is not None else ("serving.instance_type", instance.neuron_cores)
    devices = math.ceil(tp / NEURON_CORES_PER_DEVICE)
    available = inferentia_devices(instance)
    if devices > available:
        raise ConfigError(
            source,
            f"{path}.scale_to_zero.enabled",
            f"got true with {field} {tp}: a copy needs {devices} Inferentia2 devices ({NEURON_CORES_PER_DEVICE} "
            f"NeuronCores each), {serving.instance_type} has {available}; lower the TP degree or pick a larger type",
        )
    memory = weights_mb(serving.model_parameters_billions)
    host = instance.host_memory_gb * 1024
    if memory > host:
        raise ConfigError(
            source,
            f"{path}.scale_to_zero.enabled",
            f"got true with a {serving.model_parameters_billions:.2f}B-parameter model: a copy needs {memory} MiB "
            f"of host memory for its 16-bit weights, {serving.instance_type} has {host}; pick a larger type",
        )
    return ComponentSize(devices, memory, min(available // devices, host // memory))


def check_component_rollout(serving: ServingConfig, source: str, path: str) -> None:
    """A component is updated by rolling batches only: UpdateInferenceComponent's InferenceComponentDeploymentConfig
    requires a RollingUpdatePolicy and has no blue/green policy (botocore's SageMaker model)."""
    if serving.rollout.strategy != "rolling":
        raise ConfigError(
            source,
            f"{path}.rollout.strategy",
            f"got {serving.rollout.strategy!r} with scale_to_zero enabled: an inference component is updated only "
            "by rolling batches (UpdateInferenceComponent's RollingUpdatePolicy); set strategy: rolling",
        )


def check_deploy_approval(config: AppConfig, source: str) -> None:
    """Refuse scale to zero where the deploy requires approval (production traffic), unless explicitly allowed."""
    serving, deploy = config.serving, config.deploy
    if serving is None or deploy is None or not deploy.approval:
        return
    scale = serving.scale_to_zero
    if scale.enabled and not scale.allow_with_deploy_approval:
        raise ConfigError(
            source,
            "serving.scale_to_zero.enabled",
            "got true where deploy.approval is true (production traffic): the first request after an idle spell "
            "fails for minutes while a copy starts; set enabled: false, or allow_with_deploy_approval: true",
        )
