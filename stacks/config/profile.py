"""A serving profile for a base model: the settings `make profile` proposes, and the lines of config/<env>.yaml
they are (standard library and the config package).

The profile is only proposed here; whether it is allowed is decided by the synth's own rules, run on the
environment the profile is written into (profile_search.py). What the rules leave open is sized from the record:
- served positions min(context_length, 4096) and batch 4, staging's shape, then smaller shapes;
- the TP degrees the backend's container runs on ml.inf2 (its Backend record);
- the volume: what the compiled model mounted from S3 needs (stacks/config/inf2.py, the vLLM Neuron rule's bound;
  LMI NeuronX mounts its compiled model the same way);
- the start-up budget, for the download, the load and the health check: both backends serve an ahead-of-time
  compiled model, so a start is a load, not a compile (docs/serving.md, Cold start). The budget is the shipped
  profiles' 600 s (which covers the process start and the NEFF load, nothing upstream quantifies them) plus the
  16-bit weights read at ml.inf2.xlarge's EBS baseline, 156 MB/s (the slowest of the types; docs/serving.md cites
  EC2 DescribeInstanceTypes), rounded up to a minute and at most SageMaker's 3600 s;
- lmi.model_loading_timeout is that budget, and the health check and the scale-out cooldown the smallest values
  the LMI rules accept: each >= model_loading_timeout. vLLM Neuron has no such rule; its cooldown is the same
  start-up budget, for docs/serving.md's reason (an instance added during the cooldown serves only after it).
"""

from __future__ import annotations

import copy
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from ..serving.backends import backend as backend_named
from .base_model_record import BaseModelRecord, key_folder
from .inf2 import mounted_model_volume_gb, weights_gb

Scalar = str | int | float | bool | None
PREFERRED_POSITIONS = 4096
PREFERRED_BATCH = 4
LOAD_FLOOR_SECONDS = 600
EBS_BASELINE_MB_PER_SECOND = 156
MAX_TIMEOUT_SECONDS = 3600  # ContainerStartupHealthCheckTimeoutInSeconds, ModelDataDownloadTimeoutInSeconds
COMPILE_TYPE = "training.neuron_compile.instance_type"
MODEL_NAME_LENGTH = 63  # serving.model_name's pattern
# Settings of one backend's image that another backend refuses: removed when the backend changes.
BACKEND_BOUND = ("serving.image", "serving.image_uri", "serving.lmi_version")


@dataclass(frozen=True)
class Shape:
    batch_size: int
    sequence_length: int


@dataclass(frozen=True)
class Profile:
    """One serving profile: the variant, its compiled shape, the compile step's host, volume and timings."""

    backend: str
    instance_type: str
    tensor_parallel: int
    shape: Shape
    compile_instance_type: str | None  # None: the environment's compile step is off
    volume_size_gb: int
    startup_seconds: int
    download_seconds: int
    cooldown_seconds: int
    model_loading_timeout: int | None  # LMI only


@dataclass(frozen=True)
class Changes:
    """What writing a profile does to config/<env>.yaml: dotted keys set, dotted keys removed."""

    values: dict[str, Scalar]
    removed: tuple[str, ...]


def shapes(record: BaseModelRecord) -> list[Shape]:
    """Staging's shape (batch 4 at min(context, 4096) positions) first, then smaller ones."""
    positions = min(record.context_length, PREFERRED_POSITIONS)
    wanted = [
        Shape(PREFERRED_BATCH, positions),
        Shape(2, positions),
        Shape(1, positions),
        Shape(1, min(positions, 2048)),
    ]
    return list(dict.fromkeys(wanted))


def start_budget_seconds(record: BaseModelRecord) -> int:
    """The download / load / health-check budget of the module docstring."""
    read = weights_gb(record.billions) * 1000 / EBS_BASELINE_MB_PER_SECOND
    return min(MAX_TIMEOUT_SECONDS, 60 * math.ceil((LOAD_FLOOR_SECONDS + read) / 60))


def profile_for(
    record: BaseModelRecord, backend: str, instance_type: str, tp: int, shape: Shape, compile_type: str | None
) -> Profile:
    budget = start_budget_seconds(record)
    return Profile(
        backend=backend,
        instance_type=instance_type,
        tensor_parallel=tp,
        shape=shape,
        compile_instance_type=compile_type,
        volume_size_gb=mounted_model_volume_gb(record.billions),
        startup_seconds=budget,
        download_seconds=budget,
        cooldown_seconds=budget,
        model_loading_timeout=budget if backend_named(backend).loading_key else None,
    )


def profile_values(profile: Profile) -> dict[str, Scalar]:
    """The serving (and compile) lines a profile sets."""
    spec = backend_named(profile.backend)  # its section keys for the shape: TP, batch, served positions
    tp_key, batch_key, positions_key = spec.shape_keys
    values: dict[str, Scalar] = {
        "serving.backend": profile.backend,
        "serving.instance_type": profile.instance_type,
        tp_key: profile.tensor_parallel,
        batch_key: profile.shape.batch_size,
        positions_key: profile.shape.sequence_length,
        "serving.volume_size_gb": profile.volume_size_gb,
        "serving.container_startup_health_check_timeout_seconds": profile.startup_seconds,
        "serving.model_data_download_timeout_seconds": profile.download_seconds,
        "serving.autoscaling.scale_out_cooldown_seconds": profile.cooldown_seconds,
    }
    if profile.model_loading_timeout is not None:
        values[spec.loading_key] = profile.model_loading_timeout
    if profile.compile_instance_type is not None:
        values[COMPILE_TYPE] = profile.compile_instance_type
    return values


def model_values(raw: Mapping[str, Any], name: str, record: BaseModelRecord, current: str | None) -> dict[str, Scalar]:
    """The lines that make the environment train (and so serve) `record`: its hub id, or its copy's key where the
    environment trains from a copy; a new served model name when the base changes (`current`: the base now)."""
    training = raw.get("training") or {}
    has_model_id = "model_id" in (training.get("hyperparameters") or {})
    if "base_model_key" in training and not has_model_id:
        values: dict[str, Scalar] = {"training.base_model_key": key_folder(name)}
    else:
        values = {"training.hyperparameters.model_id": record.hub_id}
    if current != record.hub_id or "model_name" not in (raw.get("serving") or {}):
        values["serving.model_name"] = name[:MODEL_NAME_LENGTH]
    return values


def changes_for(raw: Mapping[str, Any], values: dict[str, Scalar], backend: str, sections: Iterable[str]) -> Changes:
    """`values` plus what changing serving.backend to `backend` removes: the other backends' sections (`sections`:
    serving.<section> of every other backend) and the previous backend's image settings."""
    serving = raw.get("serving") or {}
    removed: list[str] = []
    if serving.get("backend", "lmi_neuronx") != backend:
        removed += [key for key in BACKEND_BOUND if key.split(".")[1] in serving]
    removed += [f"serving.{section}" for section in sections if section in serving]
    return Changes(values=values, removed=tuple(removed))


def applied(raw: Mapping[str, Any], changes: Changes) -> dict[str, Any]:
    """`raw` (config/<env>.yaml's value) with `changes` made, as the written file will read."""
    result = copy.deepcopy(dict(raw))
    for dotted in changes.removed:
        *parents, key = dotted.split(".")
        node = result
        for part in parents:
            node = node.get(part) or {}
        node.pop(key, None)
    for dotted, value in changes.values.items():
        *parents, key = dotted.split(".")
        node = result
        for part in parents:
            node = node.setdefault(part, {})
        node[key] = value
    return result
