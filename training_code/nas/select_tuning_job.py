"""Pareto selection of a SageMaker tuning job's trials: the selection step of the pruning state machine.

Reads every trial through the SageMaker API: ListTrainingJobsForHyperParameterTuningJob (all pages) for the
trial names and their tuned hyperparameters, DescribeTrainingJob for each trial's status and
FinalMetricDataList, joined by TrainingJobName, never by position. A trial that did not complete or lacks an
objective metric stays in the results as failed (with its reason) and is listed in skipped.json; it never
lends its place to another trial's numbers. Then ``select_pareto.py`` writes trials.json/.csv, pareto.json
and pareto_front.png, which go to --output-dir and, with --output-s3-uri, to S3 (``pruning/<run>/``).

    python select_tuning_job.py --tuning-job-name NAME --model-dir out/supernet --output-dir out/pareto \\
        [--output-s3-uri s3://bucket/pruning/<run>/]
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import select_pareto
from pruning.cli import parse_settings, settings_parser
from pruning.pareto import parse_objectives
from pruning.settings import TuningJobSettings

TRIALS_FILE = "tuning_trials.json"
SKIPPED_FILE = "skipped.json"
UPLOADED = ("trials.json", "trials.csv", "pareto.json", "pareto_front.png", SKIPPED_FILE, TRIALS_FILE)
HYPERPARAMETERS_JSON = "/opt/ml/input/config/hyperparameters.json"


def parse_args(argv=None) -> TuningJobSettings:
    parser = settings_parser(TuningJobSettings, __doc__)
    args = parse_settings(parser, TuningJobSettings, argv)
    try:  # refused here, before any API call, rather than by select_pareto.py after listing every trial
        parse_objectives(args.objectives)
    except ValueError as error:
        parser.error(str(error))
    return args


def fetch_trials(client, tuning_job_name: str) -> list[dict]:
    """One DescribeTrainingJob-shaped record per trial, sorted by name; tuned values from the listing."""
    summaries: dict[str, dict] = {}
    request = {"HyperParameterTuningJobName": tuning_job_name, "MaxResults": 100}
    while True:
        page = client.list_training_jobs_for_hyper_parameter_tuning_job(**request)
        for summary in page.get("TrainingJobSummaries", []):
            summaries[summary["TrainingJobName"]] = summary
        if not page.get("NextToken"):
            break
        request["NextToken"] = page["NextToken"]
    records = []
    for name in sorted(summaries):
        described = client.describe_training_job(TrainingJobName=name)
        if described.get("TrainingJobName") != name:
            raise RuntimeError(f"DescribeTrainingJob({name}) answered for {described.get('TrainingJobName')}")
        summary = summaries[name]
        records.append(
            {
                "TrainingJobName": name,
                "TrainingJobStatus": described.get("TrainingJobStatus") or summary.get("TrainingJobStatus"),
                "TunedHyperParameters": dict(summary.get("TunedHyperParameters") or {}),
                "FinalMetricDataList": [
                    {"MetricName": m["MetricName"], "Value": m["Value"]}
                    for m in described.get("FinalMetricDataList") or []
                ],
                **({"FailureReason": described["FailureReason"]} if described.get("FailureReason") else {}),
            }
        )
    return records


def skipped_trials(output_dir: Path, records: list[dict]) -> list[dict]:
    """Trials select_pareto did not use, with why (its own error, or the job's FailureReason / status)."""
    reasons = {r["TrainingJobName"]: r.get("FailureReason") or r["TrainingJobStatus"] for r in records}
    rows = json.loads((output_dir / "trials.json").read_text())
    return [
        {"trial": row["trial_id"], "reason": row.get("error") or reasons.get(row["trial_id"], "failed")}
        for row in rows
        if row.get("status") != "completed"
    ]


def region_of(args) -> str | None:
    if args.region or os.environ.get("AWS_REGION"):
        return args.region or os.environ["AWS_REGION"]
    path = Path(HYPERPARAMETERS_JSON)
    if path.exists():
        return str(json.loads(path.read_text()).get("sagemaker_region", "")).strip('"') or None
    return None


def upload(output_dir: Path, s3_uri: str, s3) -> list[str]:
    bucket, _, prefix = s3_uri.removeprefix("s3://").partition("/")
    prefix = prefix if not prefix or prefix.endswith("/") else prefix + "/"
    keys = []
    for name in UPLOADED:
        path = output_dir / name
        if path.exists():
            s3.upload_file(str(path), bucket, prefix + name)
            keys.append(prefix + name)
    return keys


def main(argv=None, *, sagemaker=None, s3=None) -> int:
    args = parse_args(argv)
    if sagemaker is None or (args.output_s3_uri and s3 is None):
        import boto3
        from botocore.config import Config

        session = boto3.session.Session(region_name=region_of(args))
        config = Config(retries={"mode": "standard", "max_attempts": 10})
        sagemaker = sagemaker or session.client("sagemaker", config=config)
        s3 = s3 or session.client("s3", config=config)
    output_dir = Path(args.output_dir)
    output_dir.mkdir(parents=True, exist_ok=True)
    records = fetch_trials(sagemaker, args.tuning_job_name)
    if not records:
        raise SystemExit(f"tuning job {args.tuning_job_name} has no trials")
    trials_file = output_dir / TRIALS_FILE
    trials_file.write_text(json.dumps({"TrainingJobs": records}, indent=2, default=str))
    selection = [
        "--trials",
        str(trials_file),
        "--output-dir",
        str(output_dir),
        "--objectives",
        args.objectives,
    ]
    if args.model_dir:
        selection += ["--model-dir", args.model_dir]
    if args.search_space:
        selection += ["--search-space", args.search_space]
    select_pareto.main(selection)
    skipped = skipped_trials(output_dir, records)
    (output_dir / SKIPPED_FILE).write_text(json.dumps(skipped, indent=2))
    for entry in skipped:
        print(f"skipped trial {entry['trial']}: {entry['reason']}", flush=True)
    print(f"{len(records) - len(skipped)} of {len(records)} trials used, {len(skipped)} skipped", flush=True)
    if args.output_s3_uri:
        keys = upload(output_dir, args.output_s3_uri, s3)
        print(f"uploaded {len(keys)} files to {args.output_s3_uri}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
