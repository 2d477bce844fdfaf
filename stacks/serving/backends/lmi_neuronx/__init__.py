"""LMI (DJL Serving) NeuronX, discontinued: serving.properties in a tarball, LMI's {"inputs"} contract."""

from __future__ import annotations

from .. import Backend
from .config import (
    PARTITION_TP_DEGREES,
    LmiOptions,
    check,
    compile_memory_problem,
    compile_problem,
    compiled_folder,
    compiled_shape,
    compiler_version,
    served_positions,
    tensor_parallel,
    warnings,
)
from .contract import build_request, parse_response

BACKEND = Backend(
    name="lmi_neuronx",
    label="LMI NeuronX",
    architectures=("bloom", "gpt2", "gpt_neox", "gptj", "llama", "mistral", "mixtral", "opt"),
    images=("lmi_neuronx", "lmi_neuronx_0_29"),
    model_name_hint="the served model's name (stack description)",
    check=check,
    endpoint="stacks.serving.backends.lmi_neuronx.endpoint:LmiNeuronxEndpoint",
    model_environment={"OPTION_MODEL_ID": "/opt/ml/model"},
    build_request=build_request,
    parse_response=parse_response,
    local_server="local.servers.llm_endpoint",
    note="(discontinued)",
    section="lmi",
    options=LmiOptions,
    section_hint="lmi_neuronx only",
    warnings=warnings,
    image_pins={"lmi_neuronx_0_29": {"framework": "djl-neuronx", "version": "0.29.0"}},
    derived_images=(("lmi_neuronx", "lmi_neuronx_0_29", "0.30.0-neuronx-sdk2.20.1"),),
    served_positions=served_positions,
    tensor_parallel=tensor_parallel,
    tensor_parallel_degrees=PARTITION_TP_DEGREES,
    # transformers-neuronx shards K/V heads by serving.lmi.group_query_attention: only the heads must divide
    compiled_folder=compiled_folder,
    compiled_shape=compiled_shape,
    compiler_version=compiler_version,
    serves_compiled=True,
    compiles_at_start_up=True,
    compile_problem=compile_problem,
    compile_program="LMI NeuronX partition",
    memory_problem=compile_memory_problem,
)
