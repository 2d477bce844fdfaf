"""The SageMaker training types a job of this app may run on: host memory, GPUs and their memory (standard library).

What the compile step's host rule (stacks/serving/backends/vllm_neuronx/config.py) and the QLoRA fit
(stacks/config/qlora_fit.py) read. Figures: the EC2 instance type pages (docs.aws.amazon.com/ec2/latest/
instancetypes: general purpose gp.html, compute optimized co.html, memory optimized mo.html, accelerated
computing ac.html), which SageMaker's ml.* types mirror: C5/C6i 2 GiB, M5/M6i 4 GiB and R5/R6i 8 GiB per vCPU;
G5 one to eight NVIDIA A10G of 24 GiB; P4d eight A100 of 40 GiB; Trn1 from stacks/config/trn1.py. Only types
botocore's TrainingInstanceType lists (tests check it).
"""

from __future__ import annotations

from typing import Literal, NamedTuple

from .trn1 import TRN1_TYPES

HostKind = Literal["cpu", "gpu", "trainium"]


class TrainingHost(NamedTuple):
    kind: HostKind
    host_memory_gib: int
    gpus: int = 0
    gpu_memory_gib: int = 0  # per GPU


_VCPUS = {
    "large": 2,
    "xlarge": 4,
    "2xlarge": 8,
    "4xlarge": 16,
    "8xlarge": 32,
    "9xlarge": 36,
    "12xlarge": 48,
    "16xlarge": 64,
    "18xlarge": 72,
    "24xlarge": 96,
    "32xlarge": 128,
}
# family: (GiB per vCPU, the sizes SageMaker training offers)
_CPU_FAMILIES = {
    "c5": (2, ("xlarge", "2xlarge", "4xlarge", "9xlarge", "18xlarge")),
    "c6i": (2, ("xlarge", "2xlarge", "4xlarge", "8xlarge", "12xlarge", "16xlarge", "24xlarge", "32xlarge")),
    "m5": (4, ("large", "xlarge", "2xlarge", "4xlarge", "12xlarge", "24xlarge")),
    "m6i": (4, ("large", "xlarge", "2xlarge", "4xlarge", "8xlarge", "12xlarge", "16xlarge", "24xlarge", "32xlarge")),
    "r5": (8, ("large", "xlarge", "2xlarge", "4xlarge", "8xlarge", "12xlarge", "16xlarge", "24xlarge")),
    "r6i": (8, ("large", "xlarge", "2xlarge", "4xlarge", "8xlarge", "12xlarge", "16xlarge", "24xlarge", "32xlarge")),
}
_A10G_GIB, _A100_GIB = 24, 40
_GPU_TYPES = {
    "ml.g5.xlarge": TrainingHost("gpu", 16, 1, _A10G_GIB),
    "ml.g5.2xlarge": TrainingHost("gpu", 32, 1, _A10G_GIB),
    "ml.g5.4xlarge": TrainingHost("gpu", 64, 1, _A10G_GIB),
    "ml.g5.8xlarge": TrainingHost("gpu", 128, 1, _A10G_GIB),
    "ml.g5.16xlarge": TrainingHost("gpu", 256, 1, _A10G_GIB),
    "ml.g5.12xlarge": TrainingHost("gpu", 192, 4, _A10G_GIB),
    "ml.g5.24xlarge": TrainingHost("gpu", 384, 4, _A10G_GIB),
    "ml.g5.48xlarge": TrainingHost("gpu", 768, 8, _A10G_GIB),
    "ml.p4d.24xlarge": TrainingHost("gpu", 1152, 8, _A100_GIB),
}

TRAINING_HOSTS: dict[str, TrainingHost] = {
    **{
        f"ml.{family}.{size}": TrainingHost("cpu", per_vcpu * _VCPUS[size])
        for family, (per_vcpu, sizes) in _CPU_FAMILIES.items()
        for size in sizes
    },
    **_GPU_TYPES,
    **{name: TrainingHost("trainium", host.host_memory_gb) for name, host in TRN1_TYPES.items()},
}


def hosts_of(kind: HostKind) -> dict[str, TrainingHost]:
    return {name: host for name, host in TRAINING_HOSTS.items() if host.kind == kind}


def smallest_fitting(kind: HostKind, host_memory_gib: float, count: int = 3) -> list[str]:
    """Up to `count` types of `kind` with at least `host_memory_gib`, least memory first (for a refusal's fix)."""
    fitting = [(h.host_memory_gib, name) for name, h in hosts_of(kind).items() if h.host_memory_gib >= host_memory_gib]
    return [f"{name} ({memory} GiB)" for memory, name in sorted(fitting)[:count]]
