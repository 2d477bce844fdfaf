"""Reads trial results from the forms the pipeline produces into one row format (standard library only).

Accepted inputs (a file, or a folder searched recursively for them):
- ``trials.json`` of ``search_subnetworks.py`` (a list of rows) and ``evaluation.json`` of
  ``evaluate_subnetwork.py`` (one row);
- SageMaker training-job descriptions (DescribeTrainingJob output, alone, in a list or as JSON lines) with
  ``HyperParameters`` or ``TunedHyperParameters``, ``TrainingJobStatus`` and ``FinalMetricDataList``;
- CSV with one row per trial: hyperparameter columns, metric columns and optionally ``status`` or
  ``TrainingJobStatus`` (e.g. ``trials.csv`` or a tuning-job analytics export).

Every row keeps the configuration it was run with next to its own metrics; a row that lacks a metric or
did not complete is kept with ``status: failed`` so it can never shift another trial's numbers.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path

from .params import EncoderShape, count_macs, count_parameters, tokens_for_macs
from .search_space import ModelDims, SubnetConfig, config_from_hyperparameters

METRICS = ("validation_error", "num_parameters", "latency_ms", "macs")
_COMPLETED = {"completed", "Completed"}


def _clean(value) -> str:
    return str(value).strip().strip('"')


def _row_from_record(record: dict, index: int) -> dict:
    if "FinalMetricDataList" in record or "TrainingJobStatus" in record:
        hyperparameters = record.get("TunedHyperParameters") or record.get("HyperParameters") or {}
        metrics = {m["MetricName"]: m["Value"] for m in record.get("FinalMetricDataList", [])}
        return {
            "trial_id": record.get("TrainingJobName", index),
            "status": "completed" if record.get("TrainingJobStatus", "Completed") in _COMPLETED else "failed",
            "hyperparameters": {k: _clean(v) for k, v in hyperparameters.items()},
            **{k: metrics[k] for k in METRICS if k in metrics},
        }
    row = dict(record)
    row.setdefault("trial_id", index)
    row.setdefault("status", "completed")
    return row


# CSV columns that describe a trial but are not hyperparameters (ours and a tuning-job analytics export).
_BOOKKEEPING_COLUMNS = {
    "status",
    "TrainingJobStatus",
    "trial_id",
    "TrainingJobName",
    "heads",
    "units",
    "error",
    "FinalObjectiveValue",
    "TrainingStartTime",
    "TrainingEndTime",
    "TrainingElapsedTimeSeconds",
    "num_parameters_reported",
    "macs_tokens",
}


def _row_from_csv(record: dict, index: int) -> dict:
    status = record.get("status") or record.get("TrainingJobStatus") or "completed"
    trial_id = record.get("trial_id") or record.get("TrainingJobName") or index
    metrics = {k: float(record[k]) for k in METRICS if record.get(k) not in (None, "")}
    hyperparameters = {
        k: _clean(v)
        for k, v in record.items()
        if k not in _BOOKKEEPING_COLUMNS and k not in METRICS and v not in (None, "")
    }
    return {
        "trial_id": trial_id,
        "status": "completed" if status in _COMPLETED else "failed",
        "hyperparameters": hyperparameters,
        **metrics,
    }


def _records_from_file(path: Path) -> list[dict]:
    text = path.read_text()
    if path.suffix == ".csv":
        reader = csv.DictReader(text.splitlines())
        return [_row_from_csv(dict(r), i) for i, r in enumerate(reader)]
    if path.suffix == ".jsonl":
        data = [json.loads(line) for line in text.splitlines() if line.strip()]
    else:
        data = json.loads(text)
    if isinstance(data, dict):
        data = data.get("TrainingJobs") or data.get("trials") or [data]
    return [_row_from_record(record, i) for i, record in enumerate(data)]


def read_trials(path: str | Path) -> list[dict]:
    path = Path(path)
    if path.is_dir():
        files = sorted(
            p
            for p in path.rglob("*")
            if p.suffix in (".json", ".jsonl", ".csv") and p.name not in ("pareto.json", "config.json")
        )
        rows = [row for file in files for row in _records_from_file(file)]
    else:
        rows = _records_from_file(path)
    if not rows:
        raise ValueError(f"no trial results found in {path}")
    return rows


def complete_rows(
    rows: list[dict],
    space: str,
    dims: ModelDims | None,
    objectives: tuple[str, ...],
    shape: EncoderShape | None = None,
) -> list[dict]:
    """Adds ``subnet`` from the hyperparameters, marks rows missing an objective as failed and, given the
    model's ``shape``, recomputes ``num_parameters`` exactly from the configuration: SageMaker metrics
    are 32-bit floats, so a count above 2**24 arrives rounded (kept as ``num_parameters_reported``)."""
    for row in rows:
        if row.get("status") == "completed" and any(row.get(o) is None for o in objectives):
            row.update(status="failed", error=f"missing one of {list(objectives)}")
        if "subnet" not in row and dims is not None and row.get("hyperparameters"):
            try:
                row["subnet"] = config_from_hyperparameters(space, row["hyperparameters"], dims).to_dict()
            except ValueError as error:
                row.update(status="failed", error=str(error))
        for name in METRICS:
            if row.get(name) is not None:
                row[name] = int(float(row[name])) if name in ("num_parameters", "macs") else float(row[name])
        if shape is not None and row.get("subnet") is not None:
            exact = count_parameters(shape, SubnetConfig.from_dict(row["subnet"]))
            if row.get("num_parameters") is not None and row["num_parameters"] != exact:
                row["num_parameters_reported"] = row["num_parameters"]
            if row.get("num_parameters") is not None or row.get("status") == "completed":
                row["num_parameters"] = exact
            if row.get("macs") is not None:
                subnet = SubnetConfig.from_dict(row["subnet"])
                tokens = tokens_for_macs(shape, subnet, row["macs"])
                if tokens is not None:
                    row["macs"], row["macs_tokens"] = count_macs(shape, subnet, tokens), tokens
    return rows
