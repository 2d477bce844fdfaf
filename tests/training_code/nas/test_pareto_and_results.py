"""Pareto filter, hypervolume, the pick from the front, and reading trial results."""

from __future__ import annotations

import json

import pytest
from pruning.pareto import chance_error, hypervolume, pareto_front, pareto_mask, reference_point, select_from_front
from pruning.results import complete_rows, read_trials
from pruning.search_space import ModelDims


def test_pareto_mask_on_hand_made_points():
    points = [(0.10, 100), (0.20, 50), (0.15, 120), (0.30, 50), (0.05, 300), (0.20, 50), (0.40, 10)]
    assert pareto_mask(points) == [True, True, False, False, True, True, True]


def test_hypervolume_on_hand_made_fronts():
    assert hypervolume([(0.5, 0.5)], [1, 1]) == pytest.approx(0.25)
    # Two rectangles 0.8x0.2 and 0.2x0.4 overlapping in 0.2x0.2: 0.16 + 0.08 - 0.04.
    assert hypervolume([(0.2, 0.8), (0.8, 0.6)], [1, 1]) == pytest.approx(0.20)
    assert hypervolume([(0.2, 0.8), (0.8, 0.6), (0.9, 0.9)], [1, 1]) == pytest.approx(0.20)
    assert hypervolume([(1.2, 0.1)], [1, 1]) == 0.0
    assert hypervolume([(0.5, 0.5, 0.5)], [1, 1, 1]) == pytest.approx(0.125)
    assert hypervolume([(0.0, 0.5, 0.5), (0.5, 0.0, 0.5)], [1, 1, 1]) == pytest.approx(0.375)


def rows_from(points):
    return [
        {
            "trial_id": i,
            "validation_error": e,
            "num_parameters": p,
            "status": "completed",
            "subnet": {"heads": [i], "units": [i]},
        }
        for i, (e, p) in enumerate(points)
    ]


def test_front_is_sorted_by_size_and_pick_follows_it():
    rows = rows_from([(0.05, 300), (0.40, 10), (0.10, 100), (0.15, 120), (0.20, 50)])
    rows.append({"trial_id": 9, "status": "failed", "hyperparameters": {}})
    front = pareto_front(rows, ["validation_error", "num_parameters"])
    assert [r["num_parameters"] for r in front] == [10, 50, 100, 300]
    assert select_from_front(front, index=0)["num_parameters"] == 10
    assert select_from_front(front, index=-1)["num_parameters"] == 300
    assert select_from_front(front, max_error=0.12)["num_parameters"] == 100
    with pytest.raises(ValueError, match="no sub-network within"):
        select_from_front(front, max_error=0.01)
    with pytest.raises(IndexError):
        select_from_front(front, index=4)


def test_sagemaker_job_descriptions_keep_config_and_metrics_together(tmp_path):
    jobs = [
        {
            "TrainingJobName": "t-001",
            "TrainingJobStatus": "Completed",
            "TunedHyperParameters": {"num_layers": '"2"', "num_heads": "6", "num_units": "100"},
            "FinalMetricDataList": [
                {"MetricName": "validation_error", "Value": 0.3},
                {"MetricName": "num_parameters", "Value": 1000.0},
            ],
        },
        {
            "TrainingJobName": "t-002",
            "TrainingJobStatus": "Failed",
            "TunedHyperParameters": {"num_layers": "4", "num_heads": "12", "num_units": "5"},
            "FinalMetricDataList": [],
        },
        {
            "TrainingJobName": "t-003",
            "TrainingJobStatus": "Completed",
            "TunedHyperParameters": {"num_layers": "1", "num_heads": "3", "num_units": "7"},
            "FinalMetricDataList": [{"MetricName": "validation_error", "Value": 0.4}],
        },
    ]
    path = tmp_path / "jobs.jsonl"
    path.write_text("\n".join(json.dumps(j) for j in jobs))
    rows = complete_rows(read_trials(path), "uniform", ModelDims(6, 12, 1536), ("validation_error", "num_parameters"))
    assert [r["status"] for r in rows] == ["completed", "failed", "failed"]
    assert rows[0]["subnet"] == {"heads": [6, 6], "units": [100, 100]}
    assert rows[0]["num_parameters"] == 1000 and rows[0]["validation_error"] == 0.3
    assert rows[2]["subnet"] == {"heads": [3], "units": [7]}  # its own config, not a neighbour's


def test_tuning_job_csv_export_is_read_row_by_row(tmp_path):
    path = tmp_path / "analytics.csv"
    path.write_text(
        "TrainingJobName,TrainingJobStatus,FinalObjectiveValue,num_layers,num_heads,num_units,"
        "validation_error,num_parameters\n"
        "j-1,Completed,0.2,3,4,10,0.2,500\n"
        "j-2,Stopped,,6,12,1536,,\n"
    )
    rows = complete_rows(read_trials(path), "uniform", ModelDims(6, 12, 1536), ("validation_error", "num_parameters"))
    assert rows[0]["hyperparameters"] == {"num_layers": "3", "num_heads": "4", "num_units": "10"}
    assert rows[0]["subnet"] == {"heads": [4, 4, 4], "units": [10, 10, 10]} and rows[0]["num_parameters"] == 500
    assert rows[1]["status"] == "failed" and "validation_error" not in rows[1]


def test_error_budget_pick_can_minimise_latency():
    front = rows_from([(0.10, 100), (0.11, 200), (0.30, 50)])
    for row, latency in zip(front, (9.0, 4.0, 1.0), strict=True):
        row["latency_ms"] = latency
    assert select_from_front(front, max_error=0.12)["num_parameters"] == 100
    assert select_from_front(front, max_error=0.12, minimise="latency_ms")["num_parameters"] == 200


def test_front_keeps_each_sub_network_once():
    rows = rows_from([(0.5, 10), (0.5, 10), (0.1, 100)])
    rows[1]["subnet"] = rows[0]["subnet"]  # e.g. 0 layers reached with different head counts
    front = pareto_front(rows, ["validation_error", "num_parameters"])
    assert [r["trial_id"] for r in front] == [0, 2]


def _grid_points(seed: int, count: int, dims: int) -> list[tuple[int, ...]]:
    import random

    rng = random.Random(seed)
    return [tuple(rng.randint(0, 9) for _ in range(dims)) for _ in range(count)]


@pytest.mark.parametrize("seed", range(5))
def test_pareto_mask_agrees_with_syne_tune(seed):
    import numpy as np
    from syne_tune.optimizer.schedulers.multiobjective.non_dominated_priority import pareto_efficient

    points = _grid_points(seed, 40, 3)
    assert pareto_mask(points) == pareto_efficient(np.array(points, dtype=float)).tolist()


@pytest.mark.parametrize("seed", range(5))
def test_hypervolume_agrees_with_counting_grid_cells(seed):
    """syne-tune's ``hypervolume`` needs pymoo (not installed, not pinned): on integer points the exact
    volume is the number of unit cells of the 10^d box that some point dominates."""
    import itertools

    for dims in (2, 3):
        points = _grid_points(seed, 12, dims)
        cells = sum(
            any(all(p[i] <= c[i] for i in range(dims)) for p in points)
            for c in itertools.product(range(10), repeat=dims)
        )
        assert hypervolume(points, [10] * dims) == pytest.approx(cells)


def test_hypervolume_reference_error_is_chance():
    assert chance_error(2) == 0.5 and chance_error(3) == pytest.approx(2 / 3)
    assert reference_point(["validation_error", "num_parameters", "latency_ms"]) == [0.5, 1.0, 1.0]
    rows = rows_from([(0.25, 50), (0.6, 10)])  # the 0.6 network is worse than guessing: no volume
    front = pareto_front(rows, ["validation_error", "num_parameters"])
    from pruning.pareto import front_hypervolume

    volume = front_hypervolume(front, ["validation_error", "num_parameters"], {"num_parameters": 100})
    assert volume == pytest.approx((0.5 - 0.25) * (1 - 0.5))
