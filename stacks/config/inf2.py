"""The ml.inf2 instance types every serving backend runs on: NeuronCores, host memory, vCPUs (standard library)."""

from __future__ import annotations

from typing import NamedTuple


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
