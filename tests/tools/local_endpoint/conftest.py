"""A tiny random-init Llama (qlora_tiny) served in-process by tools/local_endpoint.py on a free loopback port."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
DATA = ROOT / "data" / "instructions.jsonl"
MAX_BATCH = 4
N_POSITIONS = 128


def _qlora_tiny():
    spec = importlib.util.spec_from_file_location(
        "local_endpoint_qlora_tiny", ROOT / "training_code" / "qlora" / "qlora_tiny.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory) -> Path:
    texts = [value for line in DATA.read_text(encoding="utf-8").splitlines() for value in json.loads(line).values()]
    return _qlora_tiny().build_tiny_llama(tmp_path_factory.mktemp("tiny") / "model", texts, num_layers=1)


@pytest.fixture(scope="module")
def endpoint(tiny_model_dir):
    import torch

    from tools.local_endpoint import Settings, start

    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # the other xdist worker has the other core
    server, thread = start(tiny_model_dir, Settings(max_batch=MAX_BATCH, n_positions=N_POSITIONS))
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)
        torch.set_num_threads(threads)  # the worker process runs other teams' tests next

