"""vLLM Neuron (Hugging Face optimum-neuron + vLLM): the compiled model mounted, OpenAI's contract."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from stacks.config.trn1 import INF2_TP_DEGREES

from ..backend import Backend, CompileStep, EndpointConstruct, JsonObject, JsonValue
from .compile_step import export_arguments, export_entrypoint
from .config import NeuronOptions, check, compile_problem, served_positions, tensor_parallel
from .contract import build_chat_request, parse_chat_response, request_warnings

if TYPE_CHECKING:
    from argparse import Namespace

    from stacks.config.serving import ServingConfig


class OptimumExport(CompileStep):
    """`optimum-cli export neuron` of serving.neuron's shape on a CPU host (compile_step.py)."""

    program = "optimum-cli export neuron"
    host_kind = "cpu"

    def folder(self, serving: ServingConfig) -> str:
        return serving.neuron.compiled_folder

    def entrypoint(self) -> tuple[str, ...]:
        return export_entrypoint()

    def arguments(self, serving: ServingConfig) -> tuple[str, ...]:
        return export_arguments(serving.neuron)

    def host_problem(self, serving: ServingConfig, instance_type: str) -> tuple[str, str] | None:
        return compile_problem(serving, instance_type)


class VllmNeuronx(Backend):
    name = "vllm_neuronx"
    label = "vLLM Neuron"
    model_name_hint = "the served model name"
    section = "neuron"
    options = NeuronOptions
    section_hint = "vllm_neuronx only: the compiled and served shape"
    shape_keys = ("serving.neuron.tensor_parallel_size", "serving.neuron.batch_size", "serving.neuron.sequence_length")

    def check(self, serving: ServingConfig, source: str, path: str) -> None:
        check(serving, source, path)

    images = ("vllm_neuronx",)
    # The maintained LLM container on ml.inf2 (optimum-neuron + vLLM); the table's only processor is neuronx,
    # so no instance type is passed (the SDK maps ml.inf2 to another processor name and refuses).
    image_pins = {
        "vllm_neuronx_0_4_4": {"framework": "huggingface-vllm-neuronx", "version": "0.4.4", "image_scope": "inference"}
    }
    # sagemaker-python-sdk's sagemaker-core table (image_uri_config/huggingface-vllm-neuronx.json, newer than the
    # 2.27.0 installed here) lists 0.4.5 -> tag prefix 0.11.0-optimum0.4.5, sdk2.26.1, py310, ubuntu22.04, in the
    # same 11 registries as 0.4.4; same vLLM (0.11.0) and Neuron SDK, and optimum-neuron 0.4.5 registers the same
    # text-generation architectures.
    derived_images = (
        ("vllm_neuronx", "vllm_neuronx_0_4_4", "0.11.0-optimum0.4.5-neuronx-py310-sdk2.26.1-ubuntu22.04"),
    )
    model_environment = {"SM_ON_MODEL": "/opt/ml/model"}
    local_server = "local.servers.vllm_server"

    def build_request(self, args: Namespace) -> JsonObject:
        return build_chat_request(args)

    def parse_response(self, body: bytes | str, status: int = 200) -> list[str]:
        return parse_chat_response(body, status)

    def request_warnings(self, payload: Mapping[str, JsonValue]) -> list[str]:
        return request_warnings(dict(payload))

    def endpoint(self) -> EndpointConstruct:
        from .endpoint import VllmNeuronxEndpoint

        return VllmNeuronxEndpoint

    compile = OptimumExport()
    serves_compiled = True
    architectures = ("granite", "llama", "llama4_text", "mixtral", "phi3", "qwen2", "qwen3", "qwen3_moe", "smollm3")
    tensor_parallel_degrees = INF2_TP_DEGREES
    # optimum-neuron (models/inference/backend/modules/attention/gqa.py, from NxD Inference) shards K/V heads when
    # TP divides them or they divide TP (replicate-to-tp-degree); otherwise it converts GQA to MHA, one K/V copy
    # per query head
    shards_kv_heads = True

    def served_positions(self, serving: ServingConfig) -> tuple[str, int]:
        return served_positions(serving)

    def tensor_parallel(self, serving: ServingConfig) -> tuple[str, int]:
        return tensor_parallel(serving)


BACKEND = VllmNeuronx()
