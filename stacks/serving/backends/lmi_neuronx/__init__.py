"""LMI (DJL Serving) NeuronX, discontinued: serving.properties in a tarball, LMI's {"inputs"} contract."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..backend import Backend, CompileStep, EndpointConstruct, JsonObject
from .compile_step import partition_arguments, partition_entrypoint, partition_environment
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

if TYPE_CHECKING:
    from argparse import Namespace

    from stacks.config.serving import ServingConfig


class LmiPartition(CompileStep):
    """The LMI image's own `partition` program on ml.trn1 (compile_step.py); the partitioned model's config.json
    records its shape and compiler, read back into the registry and checked against the lock."""

    program = "LMI NeuronX partition"
    host_kind = "trainium"

    def folder(self, serving: ServingConfig) -> str:
        return compiled_folder(serving)

    def entrypoint(self) -> tuple[str, ...]:
        return partition_entrypoint()

    def arguments(self, serving: ServingConfig) -> tuple[str, ...]:
        return partition_arguments(compiler_version(serving))

    def environment(self, serving: ServingConfig, source: str) -> dict[str, str]:
        return partition_environment(serving, source)

    def recorded_shape(self, serving: ServingConfig) -> dict[str, int | str]:
        return compiled_shape(serving)

    def compiler_version(self, serving: ServingConfig) -> str:
        return compiler_version(serving)

    def host_problem(self, serving: ServingConfig, instance_type: str) -> tuple[str, str] | None:
        return compile_problem(serving, instance_type)


class LmiNeuronx(Backend):
    name = "lmi_neuronx"
    label = "LMI NeuronX"
    note = "(discontinued)"
    model_name_hint = "the served model's name (stack description)"
    section = "lmi"
    options = LmiOptions
    section_hint = "lmi_neuronx only"
    shape_keys = ("serving.lmi.tensor_parallel_degree", "serving.lmi.max_rolling_batch_size", "serving.lmi.n_positions")
    loading_key = "serving.lmi.model_loading_timeout"

    def check(self, serving: ServingConfig, source: str, path: str) -> None:
        check(serving, source, path)

    def warnings(self, serving: ServingConfig, path: str) -> list[str]:
        return warnings(serving, path)

    images = ("lmi_neuronx", "lmi_neuronx_0_29")
    image_pins = {"lmi_neuronx_0_29": {"framework": "djl-neuronx", "version": "0.29.0"}}
    derived_images = (("lmi_neuronx", "lmi_neuronx_0_29", "0.30.0-neuronx-sdk2.20.1"),)
    model_environment = {"OPTION_MODEL_ID": "/opt/ml/model"}
    local_server = "local.servers.llm_endpoint"

    def build_request(self, args: Namespace) -> JsonObject:
        return build_request(args)

    def parse_response(self, body: bytes | str, status: int = 200) -> list[str]:
        return parse_response(body, status)

    def endpoint(self) -> EndpointConstruct:
        from .endpoint import LmiNeuronxEndpoint

        return LmiNeuronxEndpoint

    compile = LmiPartition()
    serves_compiled = True
    compiles_at_start_up = True
    architectures = ("bloom", "gpt2", "gpt_neox", "gptj", "llama", "mistral", "mixtral", "opt")
    tensor_parallel_degrees = PARTITION_TP_DEGREES
    # transformers-neuronx shards K/V heads by serving.lmi.group_query_attention: only the heads must divide

    def served_positions(self, serving: ServingConfig) -> tuple[str, int]:
        return served_positions(serving)

    def tensor_parallel(self, serving: ServingConfig) -> tuple[str, int]:
        return tensor_parallel(serving)

    def memory_problem(self, serving: ServingConfig, billions: float, compiled: bool) -> str | None:
        return compile_memory_problem(serving, billions, compiled)


BACKEND = LmiNeuronx()
