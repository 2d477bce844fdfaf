"""The local vLLM gets the arguments the vLLM Neuron container derives from the SM_ON_* values the staging template
writes. Expected flags are those of optimum-neuron 0.4.5's entrypoint.sh and optimum/commands/neuron/serve.py
(--max-num-seqs = batch size, --max-model-len = sequence length, port 8080), not of our own mapping."""

from __future__ import annotations

import pytest

from local.servers.vllm_server import container_vllm_arguments, entrypoint_arguments, local_arguments
from tests.stacks.serving.test_vllm_backend import _one


def _pairs(arguments: list[str]) -> dict[str, str]:
    return {flag: value for flag, value in zip(arguments, arguments[1:], strict=False) if flag.startswith("--")}


def test_the_staging_templates_environment_becomes_the_containers_vllm_command(templates):
    environment = _one(templates["staging"]["Serving"], "AWS::SageMaker::Model")["PrimaryContainer"]["Environment"]
    container = container_vllm_arguments(environment, "float16")
    assert _pairs(container) == {
        "--model": "/opt/ml/model",
        "--served_model_name": environment["SM_ON_SERVED_MODEL_NAME"],
        "--task": "generate",
        "--port": "8080",
        "--tensor-parallel-size": environment["SM_ON_TENSOR_PARALLEL_SIZE"],
        "--max-num-seqs": environment["SM_ON_BATCH_SIZE"],
        "--max-model-len": environment["SM_ON_SEQUENCE_LENGTH"],
        "--dtype": "float16",
    }
    local, notes = local_arguments(container, 18080)
    local_pairs = _pairs(local)
    assert "--task" not in local and local_pairs["--max-num-seqs"] == environment["SM_ON_BATCH_SIZE"]
    assert local_pairs["--max-model-len"] == environment["SM_ON_SEQUENCE_LENGTH"]
    assert local_pairs["--tensor-parallel-size"] == "1" and local_pairs["--dtype"] == "float32"
    assert local_pairs["--port"] == "18080" and local_pairs["--host"] == "127.0.0.1"
    assert [note.split(":")[0].split(" ->")[0] for note in notes] == [
        "--task generate",
        "--tensor-parallel-size 2",
        "--dtype float16",
        "--enforce-eager",
    ]
    assert "--enforce-eager" in local


def test_the_entrypoint_turns_each_sm_on_variable_into_a_flag():
    environment = {
        "SM_ON_MODEL": "/m",
        "SM_ON_ALLOW_NON_CACHED_MODEL": "",
        "SM_ON_MAX_NUM_BATCHED_TOKENS": "256",
        "PATH": "/bin",
    }
    assert entrypoint_arguments(environment) == [
        "--port",
        "8080",
        "--model",
        "/m",
        "--allow_non_cached_model",
        "--max_num_batched_tokens",
        "256",
    ]


def test_pass_through_flags_reach_vllm_and_a_missing_shape_is_one_line():
    environment = {
        "SM_ON_MODEL": "/m",
        "SM_ON_BATCH_SIZE": "2",
        "SM_ON_SEQUENCE_LENGTH": "512",
        "SM_ON_TENSOR_PARALLEL_SIZE": "2",
        "SM_ON_MAX_NUM_BATCHED_TOKENS": "256",
    }
    command = container_vllm_arguments(environment, "bfloat16")
    assert command[-2:] == ["--max_num_batched_tokens", "256"] and _pairs(command)["--served_model_name"] == "/m"
    del environment["SM_ON_BATCH_SIZE"]
    with pytest.raises(ValueError, match="SM_ON_\\* sets no batch size: the stack always sets all three"):
        container_vllm_arguments(environment, "bfloat16")


def test_the_local_environment_keeps_what_the_caller_set_and_notes_only_its_own_settings():
    from local.servers.vllm_server import environment_notes, local_environment

    assert local_environment({}) == {"VLLM_CPU_KVCACHE_SPACE": "1", "VLLM_ENABLE_V1_MULTIPROCESSING": "0"}
    assert local_environment({"VLLM_ENABLE_V1_MULTIPROCESSING": "1"})["VLLM_ENABLE_V1_MULTIPROCESSING"] == "1"
    notes = environment_notes({"VLLM_CPU_KVCACHE_SPACE": "4"})
    assert len(notes) == 1 and notes[0].startswith("VLLM_ENABLE_V1_MULTIPROCESSING=0: set (")
