"""What the vLLM Neuron backend accepts: its compiled shape (serving.neuron) and its cross-field rules.

vLLM Neuron (Hugging Face optimum-neuron 0.4.5 + vLLM 0.11) serves a model exported ahead of time with
`optimum-cli export neuron`, whose batch size, sequence length and tensor parallel size must equal the served
ones (`serve` refuses a mismatch).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from stacks.config.errors import ConfigError
from stacks.config.hosts import TRAINING_HOSTS, smallest_fitting
from stacks.config.inf2 import BYTES_PER_PARAMETER, mounted_model_volume_gb, weights_gb
from stacks.config.schema import setting

if TYPE_CHECKING:
    from stacks.config.serving import ServingConfig

ACCELERATOR_MEMORY_GB = {  # Inferentia2 HBM: 32 GB per chip of 2 NeuronCores
    "ml.inf2.xlarge": 32,
    "ml.inf2.8xlarge": 32,
    "ml.inf2.24xlarge": 192,
    "ml.inf2.48xlarge": 384,
}
HBM_GB_PER_CORE = 16
WEIGHT_SHARE_OF_HBM = 0.8  # fp16/bf16 weights may take this share of the TP group's HBM; the rest is KV cache
# The export's host memory: REFERENCE.md plans >= 64 GiB for a 7-8B model (optimum-neuron does not document it;
# Hugging Face builds its cache on inf2.8xlarge, 128 GiB, and an 8B NxD Inference compile ran out of memory in
# 32 GB), i.e. 8 GiB per billion parameters. The project's estimate, not an upstream figure.
EXPORT_HOST_GIB_PER_BILLION = 8
COMPILE_TYPE = "training.neuron_compile.instance_type"
__all__ = ["BYTES_PER_PARAMETER", "weights_gb"]


@dataclass(frozen=True)
class NeuronOptions:
    """The compiled shape of the model (vllm_neuronx): the compile step exports it and the endpoint serves
    exactly it, so the two cannot diverge; the compiled model's prefix names it (`neuron/bs4-seq4096-tp2/`)."""

    batch_size: int = setting(4, ge=1, le=64, hint="concurrent sequences of the compiled graph")
    sequence_length: int = setting(4096, ge=128, le=131072, hint="prompt + generated tokens")
    tensor_parallel_size: int = setting(2, ge=1, le=24, hint="NeuronCores per model copy")

    @property
    def compiled_folder(self) -> str:
        """The folder the compile step writes under (and a served prefix must contain)."""
        return f"neuron/bs{self.batch_size}-seq{self.sequence_length}-tp{self.tensor_parallel_size}/"

    def export_arguments(self) -> list[str]:
        """The shape arguments of `optimum-cli export neuron` (always with --tensor_parallel_size)."""
        return [
            "--batch_size",
            str(self.batch_size),
            "--sequence_length",
            str(self.sequence_length),
            "--tensor_parallel_size",
            str(self.tensor_parallel_size),
        ]


def sm_on_environment(*, model: str, served_model_name: str, neuron: NeuronOptions) -> dict[str, str]:
    """The vLLM Neuron container's `optimum-cli neuron serve` flags as SM_ON_* variables: one mapping for the
    endpoint (endpoint.py) and the local server (local/servers/vllm_server.py)."""
    return {
        "SM_ON_MODEL": model,
        "SM_ON_SERVED_MODEL_NAME": served_model_name,
        "SM_ON_BATCH_SIZE": str(neuron.batch_size),
        "SM_ON_SEQUENCE_LENGTH": str(neuron.sequence_length),
        "SM_ON_TENSOR_PARALLEL_SIZE": str(neuron.tensor_parallel_size),
    }


def check(serving: ServingConfig, source: str, path: str) -> None:
    """The TP, weights-in-HBM and volume rules on the profile's size (the served version's own facts and its
    compiled prefix's shape: stacks/config/served_model.py)."""
    neuron = serving.neuron
    cores = serving.inf2.neuron_cores
    tp = neuron.tensor_parallel_size
    if tp > cores:
        raise ConfigError(
            source,
            f"{path}.neuron.tensor_parallel_size",
            f"got {tp}; {serving.instance_type} has {cores} NeuronCores and serve needs NeuronCores >= the TP "
            f"degree: use <= {cores} or a larger inf2 type",
        )
    weights = weights_gb(serving.model_parameters_billions)
    budget = WEIGHT_SHARE_OF_HBM * tp * HBM_GB_PER_CORE
    if weights > budget:
        raise ConfigError(
            source,
            f"{path}.neuron.tensor_parallel_size",
            f"got {tp}; {weights:.1f} GB of 16-bit weights ({serving.base_model}) exceed "
            f"{WEIGHT_SHARE_OF_HBM:.0%} of {tp} x {HBM_GB_PER_CORE} GB NeuronCore memory (the rest is KV cache "
            f"for batch {neuron.batch_size} x {neuron.sequence_length} tokens): raise it (instance memory "
            f"{ACCELERATOR_MEMORY_GB[serving.instance_type]} GB)",
        )
    if serving.lmi_version is not None:
        raise ConfigError(source, f"{path}.lmi_version", "only for backend lmi_neuronx: remove it")
    needed = mounted_model_volume_gb(serving.model_parameters_billions)
    if serving.volume_size_gb < needed:
        raise ConfigError(
            source,
            f"{path}.volume_size_gb",
            f"got {serving.volume_size_gb}; the compiled model is mounted from S3 onto the volume: needs >= "
            f"{needed} GB (2 x {weights:.1f} GB weights + 10)",
        )


def served_positions(serving: ServingConfig) -> tuple[str, int]:
    return "serving.neuron.sequence_length", serving.neuron.sequence_length


def tensor_parallel(serving: ServingConfig) -> tuple[str, int]:
    return "serving.neuron.tensor_parallel_size", serving.neuron.tensor_parallel_size


def compiled_folder(serving: ServingConfig) -> str:
    return serving.neuron.compiled_folder


def compile_problem(serving: ServingConfig, chosen: str) -> tuple[str, str] | None:
    """(field, problem) when the compile step's host has too little memory for `optimum-cli export neuron` of the
    profile's model, or a type whose memory stacks/config/hosts.py does not know."""
    billions = serving.model_parameters_billions
    need = EXPORT_HOST_GIB_PER_BILLION * billions
    fits = ", ".join(smallest_fitting("cpu", need)) or "none is listed: serve a smaller model"
    host = TRAINING_HOSTS.get(chosen)
    if host is None:
        return COMPILE_TYPE, (
            f"got {chosen!r}, whose host memory stacks/config/hosts.py does not list, so the export's fit cannot be "
            f"checked: use a CPU type with >= {need:.0f} GiB, e.g. {fits}"
        )
    if host.host_memory_gib < need:
        return COMPILE_TYPE, (
            f"got {chosen!r} ({host.host_memory_gib} GiB host RAM); optimum-cli export neuron of the "
            f"{billions:.2f}B-parameter {serving.base_model} needs ~{need:.0f} GiB "
            f"({EXPORT_HOST_GIB_PER_BILLION} GiB per billion parameters, >= 64 GiB for a 7-8B model): use {fits}"
        )
    return None
