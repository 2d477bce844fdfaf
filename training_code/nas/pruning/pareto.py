"""Pareto front, hypervolume and the pick of one sub-network from it (standard library only).

All objectives are minimised. The hypervolume is computed on normalised objectives so it is comparable
between runs: ``validation_error`` as is, ``num_parameters``, ``latency_ms`` and ``macs`` divided by the
unpruned model's value. The reference point is the chance-level error (``1 - 1/num_labels``: 0.5 on a
binary task; a sub-network no better than guessing adds nothing) and 1.0 in the other normalised
objectives (the unpruned model's size, latency and MACs); points beyond it contribute nothing.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from .settings import OBJECTIVES

REFERENCE_POINT = 1.0


def parse_objectives(text: str) -> tuple[str, ...]:
    """``validation_error,macs`` -> its names; ValueError unless validation_error and known, distinct others."""
    objectives = tuple(o.strip() for o in text.split(",") if o.strip())
    if (
        set(objectives) - set(OBJECTIVES)
        or "validation_error" not in objectives
        or len(objectives) < 2
        or len(set(objectives)) != len(objectives)
    ):
        raise ValueError(f"--objectives needs validation_error and one or more others of {OBJECTIVES}, got {text!r}")
    return objectives


def chance_error(num_labels: int = 2) -> float:
    """The error of guessing uniformly among ``num_labels`` balanced classes."""
    return 1.0 - 1.0 / num_labels


def reference_point(objectives: Sequence[str], num_labels: int = 2) -> list[float]:
    return [chance_error(num_labels) if name == "validation_error" else REFERENCE_POINT for name in objectives]


def dominates(a: Sequence[float], b: Sequence[float]) -> bool:
    return all(x <= y for x, y in zip(a, b, strict=True)) and any(x < y for x, y in zip(a, b, strict=True))


def pareto_mask(points: Sequence[Sequence[float]]) -> list[bool]:
    """True for points no other point dominates (duplicates of a front point are all kept)."""
    return [not any(dominates(other, point) for other in points) for point in points]


def hypervolume(points: Sequence[Sequence[float]], reference: Sequence[float]) -> float:
    """Volume dominated by ``points`` within ``reference`` (exact, by slicing; fine for a few hundred)."""
    inside = [tuple(p) for p in points if all(x < r for x, r in zip(p, reference, strict=True))]
    if not inside:
        return 0.0
    if len(reference) == 1:
        return reference[0] - min(p[0] for p in inside)
    inside.sort(key=lambda p: p[-1])
    volume = 0.0
    for i, point in enumerate(inside):
        upper = inside[i + 1][-1] if i + 1 < len(inside) else reference[-1]
        depth = upper - point[-1]
        if depth > 0:
            volume += depth * hypervolume([p[:-1] for p in inside[: i + 1]], reference[:-1])
    return volume


def normalise(row: dict, objectives: Sequence[str], unpruned: dict) -> tuple[float, ...]:
    values = []
    for name in objectives:
        value = float(row[name])
        values.append(value if name == "validation_error" else value / float(unpruned[name]))
    return tuple(values)


def pareto_front(rows: list[dict], objectives: Sequence[str]) -> list[dict]:
    """Completed rows on the front, one per distinct sub-network, sorted by parameters (then error)."""
    done = [
        r for r in rows if r.get("status", "completed") == "completed" and all(r.get(o) is not None for o in objectives)
    ]
    mask = pareto_mask([[float(r[o]) for o in objectives] for r in done])
    front, seen = [], set()
    for row, keep in zip(done, mask, strict=True):
        # Different hyperparameters can name the same network (e.g. any heads with 0 layers): keep it once.
        key = json.dumps(row["subnet"], sort_keys=True) if "subnet" in row else None
        if keep and (key is None or key not in seen):
            front.append(row)
            seen.add(key)
    return sorted(front, key=lambda r: (float(r["num_parameters"]), float(r["validation_error"])))


def front_hypervolume(front: list[dict], objectives: Sequence[str], unpruned: dict, num_labels: int = 2) -> float:
    points = [normalise(r, objectives, unpruned) for r in front]
    return hypervolume(points, reference_point(objectives, num_labels))


def select_from_front(
    front: list[dict],
    index: int | None = None,
    max_error: float | None = None,
    minimise: str = "num_parameters",
) -> dict:
    """By position in the size-sorted front, or the one with the least ``minimise`` (parameters or
    latency) among those with ``validation_error <= max_error``."""
    if (index is None) == (max_error is None):
        raise ValueError("give exactly one of index and max_error")
    if index is not None:
        if not -len(front) <= index < len(front):
            raise IndexError(f"index {index} outside a front of {len(front)} sub-networks")
        return front[index]
    within = [r for r in front if float(r["validation_error"]) <= max_error]
    if not within:
        best = min(float(r["validation_error"]) for r in front)
        raise ValueError(f"no sub-network within error {max_error}; the best on the front has {best}")
    if any(minimise not in r for r in within):
        raise ValueError(f"{minimise} was not measured for every sub-network on the front")
    return min(within, key=lambda r: (float(r[minimise]), float(r["validation_error"])))
