"""Base against tuned, from lm-eval's own results: per task and metric, both scores, their standard errors, the
number of documents scored and the drop in points (hundredths of the metric: percentage points for accuracies),
signed so that a positive drop is always a loss, whichever way the metric improves."""

from __future__ import annotations

import math
from typing import Any

from .contract import MAX_DROP, metric_key


def _number(value: Any) -> float | None:
    """lm-eval writes "N/A" for a standard error it did not compute."""
    return float(value) if isinstance(value, int | float) else None


def _metrics(results: dict[str, Any], task: str) -> dict[str, float | None]:
    """{metric: value} of one task, lm-eval's `<metric>,<filter>` keys under the `none` filter."""
    found = results["results"][task]
    return {
        key.split(",")[0]: _number(value)
        for key, value in found.items()
        if key.endswith(",none") and "_stderr" not in key
    }


def _stderr(results: dict[str, Any], task: str, metric: str) -> float | None:
    return _number(results["results"][task].get(f"{metric}_stderr,none"))


def _drop(base: float | None, tuned: float | None, higher_is_better: bool) -> float | None:
    if base is None or tuned is None:
        return None
    return round(100.0 * ((base - tuned) if higher_is_better else (tuned - base)), 4)


def compare_task(task: str, primary: str, base: dict[str, Any], tuned: dict[str, Any]) -> dict[str, Any]:
    """One task's entry of benchmark.json."""
    better = tuned["higher_is_better"][task]
    base_values, tuned_values = _metrics(base, task), _metrics(tuned, task)
    metrics = {
        metric: {
            "base": base_values.get(metric),
            "tuned": value,
            "base_stderr": _stderr(base, task, metric),
            "tuned_stderr": _stderr(tuned, task, metric),
            "higher_is_better": bool(better.get(metric, True)),
            "drop_points": _drop(base_values.get(metric), value, bool(better.get(metric, True))),
        }
        for metric, value in tuned_values.items()
    }
    return {
        "primary_metric": primary,
        "docs": {"base": base["n-samples"][task]["effective"], "tuned": tuned["n-samples"][task]["effective"]},
        "version": tuned["versions"].get(task),
        "n_shot": tuned.get("n-shot", {}).get(task),
        "metrics": metrics,
    }


def summary(tasks: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """The gate's figures: the largest drop of any task's primary metric, and which task it was."""
    drops = {task: entry["metrics"][entry["primary_metric"]]["drop_points"] for task, entry in tasks.items()}
    known = {task: drop for task, drop in drops.items() if drop is not None and not math.isnan(drop)}
    worst = max(known, key=known.__getitem__) if known else None
    return {MAX_DROP: known[worst] if worst else None, "max_drop_task": worst}


def metric_lines(tasks: dict[str, dict[str, Any]], scores: dict[str, Any]) -> list[str]:
    """key=value lines SageMaker's metric definitions scrape (contract.metric_definitions): every metric."""
    lines = []
    for task, entry in tasks.items():
        for metric, values in entry["metrics"].items():
            pairs = [
                f"{metric_key(task, metric, side)}={values[side]:.6g}"
                for side in ("base", "tuned", "drop_points")
                if values[side] is not None
            ]
            lines.append(" ".join(pairs))
    if scores[MAX_DROP] is not None:
        lines.append(f"{MAX_DROP}={scores[MAX_DROP]:.6g}")
    return lines
