"""vLLM Neuron (Hugging Face optimum-neuron + vLLM): the compiled model mounted, OpenAI's contract."""

from __future__ import annotations

from stacks.config.trn1 import INF2_TP_DEGREES

from .. import Backend
from .config import NeuronOptions, check, compile_problem, compiled_folder, served_positions, tensor_parallel
from .contract import build_chat_request, parse_chat_response, request_warnings

BACKEND = Backend(
    name="vllm_neuronx",
    label="vLLM Neuron",
    architectures=("granite", "llama", "llama4_text", "mixtral", "phi3", "qwen2", "qwen3", "qwen3_moe", "smollm3"),
    images=("vllm_neuronx",),
    model_name_hint="the served model name",
    check=check,
    endpoint="stacks.serving.backends.vllm_neuronx.endpoint:VllmNeuronxEndpoint",
    model_environment={"SM_ON_MODEL": "/opt/ml/model"},
    build_request=build_chat_request,
    parse_response=parse_chat_response,
    request_warnings=request_warnings,
    local_server="local.servers.vllm_server",
    section="neuron",
    options=NeuronOptions,
    section_hint="vllm_neuronx only: the compiled and served shape",
    # The maintained LLM container on ml.inf2 (optimum-neuron + vLLM); the table's only processor is neuronx,
    # so no instance type is passed (the SDK maps ml.inf2 to another processor name and refuses).
    image_pins={
        "vllm_neuronx_0_4_4": {"framework": "huggingface-vllm-neuronx", "version": "0.4.4", "image_scope": "inference"}
    },
    # sagemaker-python-sdk's sagemaker-core table (image_uri_config/huggingface-vllm-neuronx.json, newer than the
    # 2.27.0 installed here) lists 0.4.5 -> tag prefix 0.11.0-optimum0.4.5, sdk2.26.1, py310, ubuntu22.04, in the
    # same 11 registries as 0.4.4; same vLLM (0.11.0) and Neuron SDK, and optimum-neuron 0.4.5 registers the same
    # text-generation architectures.
    derived_images=(("vllm_neuronx", "vllm_neuronx_0_4_4", "0.11.0-optimum0.4.5-neuronx-py310-sdk2.26.1-ubuntu22.04"),),
    served_positions=served_positions,
    tensor_parallel=tensor_parallel,
    tensor_parallel_degrees=INF2_TP_DEGREES,
    # optimum-neuron (models/inference/backend/modules/attention/gqa.py, from NxD Inference) shards K/V heads when
    # TP divides them or they divide TP (replicate-to-tp-degree); otherwise it converts GQA to MHA, one K/V copy
    # per query head
    shards_kv_heads=True,
    compiled_folder=compiled_folder,
    serves_compiled=True,
    compile_program="optimum-cli export neuron",
    compile_problem=compile_problem,
)
