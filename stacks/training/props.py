"""The facts the Training stack takes from outside its own section, each resolved once by stacks/application.py.

The training section says how to train; where the jobs run (network), what a model is registered for (the served
backend) and what the compile step runs (the backend's compile step for the served shape) come from the network
and serving sections. They travel as these small values so the stack and its request builders never read another
section, and a backend is asked once, at the boundary.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..shared.placement import Placement

if TYPE_CHECKING:
    from ..config.serving import ServingConfig
    from ..config.training import TrainingConfig


@dataclass(frozen=True)
class JobNetwork:
    """Where the training-type jobs run. `vpc`: isolated mode's placement, else training.subnet_ids and
    security_group_ids, else None; `offline`: network-isolated containers (training.network_isolation or
    isolated mode); `isolated_mode`: network.isolated, where the code comes as a channel (no S3 download)."""

    vpc: Placement | None
    offline: bool
    isolated_mode: bool


def job_network(training: TrainingConfig, placement: Placement | None) -> JobNetwork:
    """`placement`: isolated mode's subnets and security groups (network.isolated), or None."""
    vpc = placement
    if placement is None and training.subnet_ids:
        vpc = Placement(subnet_ids=training.subnet_ids, security_group_ids=training.security_group_ids)
    return JobNetwork(
        vpc=vpc, offline=training.network_isolation or placement is not None, isolated_mode=placement is not None
    )


@dataclass(frozen=True)
class ServedBackend:
    """What a registered version is packaged for: the serving backend, its image (stacks/images.json's name, or
    serving.image_uri), the ml.inf2 type, and where its container reads a mounted model."""

    backend: str
    image: str
    image_uri: str | None
    instance_type: str
    model_environment: Mapping[str, str]


def served_backend(serving: ServingConfig) -> ServedBackend:
    return ServedBackend(
        backend=serving.backend,
        image=serving.image_name,
        image_uri=serving.image_uri,
        instance_type=serving.instance_type,
        model_environment=dict(serving.spec.model_environment),
    )


@dataclass(frozen=True)
class CompileFacts:
    """The backend's compile step for the served shape: what the compile job runs (`image`, `entrypoint`,
    `arguments`, `environment`), the folder its output names, and whether the compiled model records its shape
    in its config.json (read into the compiled version's metadata)."""

    program: str
    image: str
    folder: str
    entrypoint: tuple[str, ...]
    arguments: tuple[str, ...]
    environment: Mapping[str, str] | None
    records_shape: bool


def compile_facts(serving: ServingConfig, source: str) -> CompileFacts:
    """`serving`'s backend must have a compile step (AppConfig.compiles_for_neuron); `source`: the config file
    a compile step's own refusal names."""
    step = serving.spec.compile
    return CompileFacts(
        program=step.program,
        image=step.image(serving),
        folder=step.folder(serving),
        entrypoint=step.entrypoint(),
        arguments=step.arguments(serving),
        environment=step.environment(serving, source),
        records_shape=step.recorded_shape(serving) is not None,
    )
