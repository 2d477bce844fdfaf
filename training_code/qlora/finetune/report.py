"""training_report.json: what ran, on what, how fast, with how much memory, and whether the merge held."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from .resources import peak_gpu_gb, peak_gpu_reserved_gb, peak_rss_gb, versions

REPORT_NAME = "training_report.json"


def loss_curve(log_history: list[dict[str, Any]]) -> dict[str, list[dict[str, float]]]:
    """Training and evaluation losses by step, from the Trainer's log history (kept across resumes)."""
    train = [
        {key: entry[key] for key in ("step", "epoch", "loss", "learning_rate", "grad_norm") if key in entry}
        for entry in log_history
        if "loss" in entry
    ]
    evaluation = [
        {"step": entry["step"], "epoch": entry.get("epoch"), "eval_loss": entry["eval_loss"]}
        for entry in log_history
        if "eval_loss" in entry
    ]
    return {"train": train, "eval": evaluation}


class RunReport:
    def __init__(self, args: dict[str, Any]) -> None:
        self.data: dict[str, Any] = {"arguments": args, "versions": versions(), "durations_seconds": {}}

    @contextmanager
    def timed(self, phase: str) -> Iterator[None]:
        started = time.perf_counter()
        try:
            yield
        finally:
            self.data["durations_seconds"][phase] = round(time.perf_counter() - started, 3)

    def set(self, **values: Any) -> None:
        self.data.update(values)

    def record_memory(self, label: str) -> None:
        memory = self.data.setdefault("peak_memory_gb", {})
        memory[label] = {
            "rss": round(peak_rss_gb(), 4),
            "gpu": _rounded(peak_gpu_gb()),
            "gpu_reserved": _rounded(peak_gpu_reserved_gb()),
        }

    def write(self, output_dir: str) -> Path:
        path = Path(output_dir) / REPORT_NAME
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(self.data, indent=2, default=str) + "\n", encoding="utf-8")
        return path


def _rounded(value: float | None) -> float | None:
    return None if value is None else round(value, 4)
