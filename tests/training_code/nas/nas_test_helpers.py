"""Paths and small helpers shared by the NAS tests (imported by name: conftest is not importable)."""

from __future__ import annotations

from pathlib import Path

REPO = Path(__file__).resolve().parents[3]
NAS_DIR = REPO / "training_code" / "nas"
HANDLER_DIR = REPO / "serving_artifacts" / "encoder_classifier" / "code"
