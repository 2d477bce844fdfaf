"""Shared fixtures: tiny random-init Llamas built offline inside the test run."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
QLORA_DIR = HERE.parents[2] / "training_code" / "qlora"
for folder in (QLORA_DIR, HERE):
    if str(folder) not in sys.path:
        sys.path.insert(0, str(folder))

from qlora_test_helpers import vocab_texts  # noqa: E402

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # everything is built locally; never wait on a network call


@pytest.fixture(scope="session")
def tiny_llama(tmp_path_factory) -> Path:
    """A tiny Llama whose tokenizer has no chat template (like Llama 2 base)."""
    from finetune.tiny import build_tiny_llama

    return build_tiny_llama(tmp_path_factory.mktemp("tiny_llama"), vocab_texts(), vocab_size=384)


@pytest.fixture(scope="session")
def tiny_chat_llama(tmp_path_factory) -> Path:
    """The same size of model with a chat template on its tokenizer."""
    from finetune.tiny import build_tiny_llama

    return build_tiny_llama(tmp_path_factory.mktemp("tiny_chat"), vocab_texts(), chat_template=True, vocab_size=384)


@pytest.fixture(scope="session")
def tokenizer(tiny_llama):
    from finetune.model import load_tokenizer

    return load_tokenizer(str(tiny_llama))


@pytest.fixture(scope="session")
def chat_tokenizer(tiny_chat_llama):
    from finetune.model import load_tokenizer

    return load_tokenizer(str(tiny_chat_llama))


@pytest.fixture(autouse=True, scope="module")
def one_torch_thread():
    """Tiny models gain nothing from threads, and spinning OpenMP threads crawl on a shared 2-core machine.

    Restored after each module so that other test folders in the same process keep their setting.
    """
    import torch

    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(previous)
