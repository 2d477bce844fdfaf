"""Writes search results: all trials (JSON and CSV), the Pareto set with its hypervolume, and the plot."""

from __future__ import annotations

import csv
import json
from pathlib import Path

from .pareto import front_hypervolume, pareto_front, reference_point

TRIALS_JSON, TRIALS_CSV, PARETO_JSON, FRONT_PNG = (
    "trials.json",
    "trials.csv",
    "pareto.json",
    "pareto_front.png",
)


def flat_row(row: dict) -> dict:
    flat = {k: v for k, v in row.items() if k not in ("hyperparameters", "subnet")}
    flat.update(row.get("hyperparameters", {}))
    subnet = row.get("subnet") or {}
    flat["heads"] = ";".join(str(h) for h in subnet.get("heads", []))
    flat["units"] = ";".join(str(u) for u in subnet.get("units", []))
    return flat


def write_trials(rows: list[dict], output_dir: Path) -> None:
    output_dir.mkdir(parents=True, exist_ok=True)
    (output_dir / TRIALS_JSON).write_text(json.dumps(rows, indent=2))
    flat = [flat_row(r) for r in rows]
    columns = list(dict.fromkeys(key for r in flat for key in r))
    with open(output_dir / TRIALS_CSV, "w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=columns)
        writer.writeheader()
        writer.writerows(flat)


def plot_front(rows: list[dict], front: list[dict], unpruned: dict | None, path: Path, title: str) -> None:
    """Parameters (log scale) against validation error: all trials, the front, the unpruned model."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    done = [r for r in rows if r.get("status", "completed") == "completed"]
    fig, ax = plt.subplots(figsize=(7, 4.5))
    ax.scatter(
        [r["num_parameters"] for r in done],
        [r["validation_error"] for r in done],
        s=14,
        alpha=0.5,
        color="tab:gray",
        label=f"sub-networks ({len(done)})",
    )
    ax.step(
        [r["num_parameters"] for r in front],
        [r["validation_error"] for r in front],
        where="post",
        color="tab:blue",
        marker="o",
        label=f"Pareto front ({len(front)})",
    )
    if unpruned is not None:
        ax.scatter(
            [unpruned["num_parameters"]],
            [unpruned["validation_error"]],
            marker="*",
            s=220,
            color="tab:red",
            label="unpruned model",
            zorder=5,
        )
    ax.set_xscale("log")
    ax.set_xlabel("parameters (log scale)")
    ax.set_ylabel("validation error")
    ax.set_title(title)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def write_pareto(
    rows: list[dict],
    objectives: list[str],
    unpruned: dict,
    output_dir: Path,
    title: str = "Sub-network search",
    mark_unpruned: bool = True,
    num_labels: int = 2,
) -> dict:
    """Computes the front (sorted by size), its hypervolume, writes pareto.json and the plot."""
    output_dir.mkdir(parents=True, exist_ok=True)
    front = pareto_front(rows, objectives)
    summary = {
        "objectives": list(objectives),
        "hypervolume": front_hypervolume(front, objectives, unpruned, num_labels),
        "reference_point": dict(zip(objectives, reference_point(objectives, num_labels), strict=True)),
        "normalisation": "validation_error as is (reference: chance); other objectives divided by the unpruned model's",
        "unpruned": unpruned,
        "num_trials": len(rows),
        "num_failed": sum(r.get("status") == "failed" for r in rows),
        "pareto": front,
    }
    (output_dir / PARETO_JSON).write_text(json.dumps(summary, indent=2))
    plot_front(rows, front, unpruned if mark_unpruned else None, output_dir / FRONT_PNG, title)
    return summary
