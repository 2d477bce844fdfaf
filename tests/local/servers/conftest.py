"""Tiny random-init Llamas (finetune.tiny) on free loopback ports: in-process behind the LMI stand-in (`endpoint`) and,
with a chat template, served by real vLLM through `local/servers/llm_endpoint --backend vllm_neuronx`
(`vllm_endpoint`, one start per test session and xdist worker: the modules that use it share the xdist group "vllm")."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from tests.local.servers.serving import MAX_BATCH, N_POSITIONS, ROOT, SERVED_NAME, serving

DATA = ROOT / "data" / "instructions.jsonl"


def _qlora_tiny():
    """training_code/qlora's finetune.tiny, its package loaded under a name of its own (the NAS code's modules
    share this process)."""
    folder = ROOT / "training_code" / "qlora" / "finetune"
    name = "local_endpoint_qlora_finetune"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(
            name, folder / "__init__.py", submodule_search_locations=[str(folder)]
        )
        package = importlib.util.module_from_spec(spec)
        sys.modules[name] = package
        spec.loader.exec_module(package)
    return importlib.import_module(f"{name}.tiny")


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
    """The same tiny Llama with 2 heads (vLLM's CPU attention takes head sizes from 32 up, not 16), its tokenizer
    carrying a ChatML-like chat_template (finetune.tiny.TINY_CHAT_TEMPLATE)."""
    out = tmp_path_factory.mktemp("tiny-chat") / "model"
    return _qlora_tiny().build_tiny_llama(out, _texts(), chat_template=True, num_layers=1, num_heads=2)


VLLM_ARGV = [
    "--backend",
    "vllm_neuronx",
    "--served-model-name",
    SERVED_NAME,
    "--batch-size",
    str(MAX_BATCH),
    "--sequence-length",
    str(N_POSITIONS),
]


@pytest.fixture(scope="session")
def vllm_endpoint(chat_model_dir, tmp_path_factory):
    """Real vLLM on the chat model, as SERVED_NAME with sequence length N_POSITIONS, started the way a user starts
    it (the command line); `log` is its output, `ready_s` its start-up time."""
    work = tmp_path_factory.mktemp("vllm")
    port_file, log_path = work / "port", work / "server.log"
    argv = [
        sys.executable,
        "local/servers/llm_endpoint",
        "--model-dir",
        str(chat_model_dir),
        *VLLM_ARGV,
        "--port",
        "0",
        "--port-file",
        str(port_file),
    ]
    started = time.monotonic()
    with log_path.open("w") as log:
        process = subprocess.Popen(argv, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT)
    try:
        while not (port_file.is_file() and port_file.read_text()):
            assert process.poll() is None, log_path.read_text()[-3000:]
            assert time.monotonic() - started < 600, "vLLM did not start within 600 s"
            time.sleep(0.5)
        url = f"http://127.0.0.1:{port_file.read_text()}"
        yield SimpleNamespace(url=url, model_dir=chat_model_dir, log=log_path, ready_s=time.monotonic() - started)
    finally:
        process.terminate()
        process.wait(timeout=60)
