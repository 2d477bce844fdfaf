"""Tiny random-init Llamas (qlora_tiny) served in-process by tools/local_endpoint.py on free loopback ports:
behind the LMI contract (`endpoint`) and, with a chat template, behind the vLLM Neuron one (`vllm_endpoint`)."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

from tests.tools.local_endpoint.serving import ROOT, SERVED_NAME, serving

DATA = ROOT / "data" / "instructions.jsonl"


def _qlora_tiny():
    spec = importlib.util.spec_from_file_location(
        "local_endpoint_qlora_tiny", ROOT / "training_code" / "qlora" / "qlora_tiny.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _texts() -> list[str]:
    return [value for line in DATA.read_text(encoding="utf-8").splitlines() for value in json.loads(line).values()]


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory) -> Path:
    return _qlora_tiny().build_tiny_llama(tmp_path_factory.mktemp("tiny") / "model", _texts(), num_layers=1)


@pytest.fixture(scope="module")
def endpoint(tiny_model_dir):
    with serving(tiny_model_dir) as server:
        yield server


@pytest.fixture(scope="session")
def chat_model_dir(tmp_path_factory) -> Path:
    """The same tiny Llama, its tokenizer carrying a ChatML-like chat_template (qlora_tiny.TINY_CHAT_TEMPLATE)."""
    out = tmp_path_factory.mktemp("tiny-chat") / "model"
    return _qlora_tiny().build_tiny_llama(out, _texts(), chat_template=True, num_layers=1)


@pytest.fixture(scope="module")
def vllm_endpoint(chat_model_dir):
    """The chat model behind the vLLM Neuron contract, served as SERVED_NAME with sequence length N_POSITIONS."""
    with serving(chat_model_dir, backend="vllm_neuronx", served_model_name=SERVED_NAME) as server:
        yield server
