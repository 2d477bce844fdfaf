"""The pruning stack's selection step on a recorded tuning job: trials joined by name, failed trials skipped.

The seed notebook zipped a list of hyperparameters with a list of metrics by position, so one failed trial
shifted every later trial's numbers onto the wrong configuration. Here each trial must keep its own.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import select_tuning_job
from nas_test_helpers import RecordedSageMaker

RECORDED = Path(__file__).with_name("recorded") / "tuning_job_trials.json"


class FakeS3:
    def __init__(self) -> None:
        self.uploaded: dict[str, bytes] = {}

    def upload_file(self, filename, bucket, key):
        self.uploaded[f"{bucket}/{key}"] = Path(filename).read_bytes()


@pytest.fixture(scope="module")
def recording() -> dict:
    return json.loads(RECORDED.read_text())


@pytest.fixture(scope="module")
def selected(recording, minilm_path, tmp_path_factory):
    out = tmp_path_factory.mktemp("select")
    sagemaker, s3 = RecordedSageMaker(recording), FakeS3()
    select_tuning_job.main(
        [
            "--tuning-job-name",
            recording["tuning_job_name"],
            "--model-dir",
            str(minilm_path),
            "--output-dir",
            str(out),
            "--output-s3-uri",
            "s3://artifacts/pruning/run-1/",
        ],
        sagemaker=sagemaker,
        s3=s3,
    )
    rows = {row["trial_id"]: row for row in json.loads((out / "trials.json").read_text())}
    return out, rows, sagemaker, s3


def _by_suffix(rows: dict, number: str) -> dict:
    (row,) = [r for name, r in rows.items() if name.split("-")[-2] == number]
    return row


def test_every_trial_across_pages_is_read_once(selected, recording):
    _, rows, sagemaker, _ = selected
    assert sorted(sagemaker.described) == sorted(recording["describe"])
    assert len(rows) == 7


def test_each_trial_keeps_its_own_configuration_and_metrics(selected, recording):
    _, rows, _, _ = selected
    for name, described in recording["describe"].items():
        row = rows[name]
        metrics = {m["MetricName"]: m["Value"] for m in described.get("FinalMetricDataList", [])}
        for metric in ("validation_error", "num_parameters", "latency_ms"):
            if metric in metrics:
                assert row[metric] == pytest.approx(metrics[metric]), (name, metric)
            else:
                assert row.get(metric) is None, (name, metric)
        tuned = next(
            s["TunedHyperParameters"]
            for page in recording["list_pages"]
            for s in page["TrainingJobSummaries"]
            if s["TrainingJobName"] == name
        )
        assert {k: row["hyperparameters"][k] for k in tuned} == tuned
    # Trial 003 (3 layers) follows the failed 002 in name order: it must not inherit 002's or 004's numbers.
    row = _by_suffix(rows, "003")
    assert row["subnet"] == {"heads": [6, 6, 6], "units": [512, 512, 512]}
    described = next(d for n, d in recording["describe"].items() if n.split("-")[-2] == "003")
    recorded = {m["MetricName"]: m["Value"] for m in described["FinalMetricDataList"]}
    assert (row["validation_error"], row["num_parameters"]) == (recorded["validation_error"], 14_141_762)


def test_failed_stopped_and_incomplete_trials_are_skipped_and_reported(selected):
    out, rows, _, _ = selected
    entries = json.loads((out / "skipped.json").read_text())
    skipped = {entry["trial"].split("-")[-2]: entry["reason"] for entry in entries}
    assert set(skipped) == {"002", "006"}
    assert "ExitCode 1" in skipped["002"] and "File exists" in skipped["002"]  # failed after logging metrics
    assert skipped["006"] == "Stopped"  # stopped before logging any
    for number in skipped:
        assert _by_suffix(rows, number)["status"] == "failed"


def test_pareto_front_uses_completed_trials_only(selected):
    out, _, _, _ = selected
    summary = json.loads((out / "pareto.json").read_text())
    front = {row["trial_id"].split("-")[-2] for row in summary["pareto"]}
    assert front == {"001", "004", "007"}, "003 and 005 are dominated by 001; 002/006 never compete"
    assert summary["num_failed"] == 2


def test_results_are_uploaded_under_the_run_prefix(selected):
    _, _, _, s3 = selected
    keys = set(s3.uploaded)
    expected = {
        "trials.json",
        "trials.csv",
        "pareto.json",
        "pareto_front.png",
        "skipped.json",
        "tuning_trials.json",
    }
    assert keys == {f"artifacts/pruning/run-1/{name}" for name in expected}
    assert s3.uploaded["artifacts/pruning/run-1/pareto_front.png"].startswith(b"\x89PNG")
