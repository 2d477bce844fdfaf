"""The ml.inf2 instance types every serving backend runs on: NeuronCores, host memory, vCPUs (standard library)."""

from __future__ import annotations

import math
from typing import NamedTuple

BYTES_PER_PARAMETER = 2  # the served weights keep config.json's fp16/bf16 dtype


class Inf2Type(NamedTuple):
    neuron_cores: int
    host_memory_gb: int
    vcpus: int


INF2_TYPES: dict[str, Inf2Type] = {
    "ml.inf2.xlarge": Inf2Type(2, 16, 4),
    "ml.inf2.8xlarge": Inf2Type(2, 128, 32),
    "ml.inf2.24xlarge": Inf2Type(12, 384, 96),
    "ml.inf2.48xlarge": Inf2Type(24, 768, 192),
}


def weights_gb(parameters_billions: float) -> float:
    """GB of the served 16-bit weights."""
    return parameters_billions * BYTES_PER_PARAMETER


def mounted_model_volume_gb(parameters_billions: float) -> int:
    """The ML storage volume a compiled model mounted from S3 needs (ml.inf2 has no instance storage): twice the
    16-bit weights, plus 10 GB for the container's own files."""
    return math.ceil(2 * weights_gb(parameters_billions) + 10)


# Each Inferentia2 device (chip) holds two NeuronCore-v2 (AWS Neuron docs, "Inferentia2 Architecture": "Each
# Inferentia2 device has two NeuronCores-v2"; "Inf2 Architecture": ml.inf2.xlarge and 8xlarge have 1 device,
# 24xlarge 6, 48xlarge 12). An inference component counts accelerators in devices
# (NumberOfAcceleratorDevicesRequired: "Accelerators include GPUs and Amazon Web Services Inferentia").
NEURON_CORES_PER_DEVICE = 2


def inferentia_devices(instance: Inf2Type) -> int:
    return instance.neuron_cores // NEURON_CORES_PER_DEVICE
