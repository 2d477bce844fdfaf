"""What each serving backend accepts: architectures, images, and the vLLM Neuron backend's compiled shape.

LMI NeuronX (djl-inference 0.30.0-neuronx, the last one: djl-serving dropped Neuron in Nov 2025) loads
transformers-neuronx models; vLLM Neuron (Hugging Face optimum-neuron 0.4.5 + vLLM 0.11) serves a model
exported ahead of time with `optimum-cli export neuron`, whose batch size, sequence length and tensor
parallel size must equal the served ones (`serve` refuses a mismatch).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from .schema import setting

Backend = Literal["lmi_neuronx", "vllm_neuronx"]
ARCHITECTURES: dict[str, tuple[str, ...]] = {  # config.json model_type values each backend's loader knows
    "lmi_neuronx": ("bloom", "gpt2", "gpt_neox", "gptj", "llama", "mistral", "mixtral", "opt"),
    "vllm_neuronx": ("granite", "llama", "llama4_text", "mixtral", "phi3", "qwen2", "qwen3", "qwen3_moe", "smollm3"),
}
IMAGES: dict[str, tuple[str, ...]] = {  # stacks/images.json names per backend; the first is the default
    "lmi_neuronx": ("lmi_neuronx", "lmi_neuronx_0_29"),
    "vllm_neuronx": ("vllm_neuronx",),
}
LABELS = {"lmi_neuronx": "LMI NeuronX", "vllm_neuronx": "vLLM Neuron"}
LMI_DISCONTINUED = (
    "the LMI NeuronX container is discontinued (djl-serving dropped Neuron in Nov 2025, PR #2939; the last image is "
    "djl-inference:0.30.0-neuronx-sdk2.20.1 and it loads no qwen2/qwen3): the maintained alternative is "
    "backend: vllm_neuronx (Hugging Face vLLM Neuron)"
)
ACCELERATOR_MEMORY_GB = {  # Inferentia2 HBM: 32 GB per chip of 2 NeuronCores
    "ml.inf2.xlarge": 32,
    "ml.inf2.8xlarge": 32,
    "ml.inf2.24xlarge": 192,
    "ml.inf2.48xlarge": 384,
}
HBM_GB_PER_CORE = 16
WEIGHT_SHARE_OF_HBM = 0.8  # fp16/bf16 weights may take this share of the TP group's HBM; the rest is KV cache
BYTES_PER_PARAMETER = 2  # the export keeps config.json's fp16/bf16 dtype


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
    endpoint (stacks/serving/vllm_neuronx_endpoint.py) and the local server (local/servers/vllm_server.py)."""
    return {
        "SM_ON_MODEL": model,
        "SM_ON_SERVED_MODEL_NAME": served_model_name,
        "SM_ON_BATCH_SIZE": str(neuron.batch_size),
        "SM_ON_SEQUENCE_LENGTH": str(neuron.sequence_length),
        "SM_ON_TENSOR_PARALLEL_SIZE": str(neuron.tensor_parallel_size),
    }


def weights_gb(parameters_billions: float) -> float:
    return parameters_billions * BYTES_PER_PARAMETER
