"""The model card with the benchmark's scores: the tuned model's own README.md (train.py's card, from the `model`
channel) followed by a section of benchmark.json's figures, written beside benchmark.json. The model folder itself is
the training job's output and stays as train.py wrote it; the registered version names this folder
(`benchmark_scores`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..card import CARD_FILE
from .contract import MAX_DROP, SCORES_FILE


def _figure(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.4f}"


def benchmark_section(scores: dict[str, Any]) -> str:
    """Per task and metric: base, tuned and the drop in points (the primary metric, which the gate compares,
    marked); then the gate's figure."""
    rows = "\n".join(
        f"| {task} | {metric}{' (primary)' if metric == entry['primary_metric'] else ''} | {_figure(values['base'])} "
        f"| {_figure(values['tuned'])} | {_figure(values['drop_points'])} |"
        for task, entry in scores["tasks"].items()
        for metric, values in entry["metrics"].items()
    )
    worst = scores[MAX_DROP]
    gate = "no primary metric was scored" if worst is None else f"{worst:g} ({scores['max_drop_task']})"
    return f"""## Benchmark (lm-evaluation-harness {scores["lm_eval_version"]})

The merged model and its base on the same tasks and settings (few-shot {scores["num_fewshot"] or "each task's own"},
limit {scores["limit"] or "none"}); a drop is the points the merged model lost against its base.

| task | metric | base | merged | drop (points) |
| --- | --- | --- | --- | --- |
{rows}

{MAX_DROP}: {gate}. Full record: `{SCORES_FILE}`.
"""


def write_benchmark_card(output_dir: str | Path, model_dir: str | None, scores: dict[str, Any]) -> Path:
    """README.md in `output_dir`: the model's card (when its folder has one), then the benchmark section."""
    card = Path(model_dir) / CARD_FILE if model_dir else None
    head = card.read_text(encoding="utf-8").rstrip() + "\n\n" if card is not None and card.is_file() else ""
    path = Path(output_dir) / CARD_FILE
    path.write_text(head + benchmark_section(scores), encoding="utf-8")
    return path
