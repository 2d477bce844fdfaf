"""The manual-start input: one validator for the tool, one line per rejection, nothing started on a bad input."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest

from stacks.code_contract.qlora import RESERVED, hyperparameter_names, hyperparameter_problem
from stacks.config.training import TrainingConfig
from stacks.training.execution_input import InputError, validate_execution_input
from tests.synth import ROOT

BUCKET = "llm-inf2-dev-data-artifactbucket-abc123"
DATA = f"s3://{BUCKET}/datasets/guanaco/train.jsonl"

# (case id, input, bucket to check against, expected fragment of the one-line error)
REJECTED = [
    ("not-an-object", ["a"], BUCKET, "<input>: got ['a']; expected an object"),
    ("unknown-key", {"train_data": DATA, "hyperparams": {}}, BUCKET, "hyperparams: unknown key"),
    ("missing-data", {"hyperparameters": {}}, BUCKET, "train_data: missing"),
    ("data-not-string", {"train_data": 5}, BUCKET, "train_data: got 5; expected an s3://"),
    ("not-s3", {"train_data": "https://x/datasets/a"}, BUCKET, "expected s3://<bucket>/datasets/<key>"),
    ("wrong-bucket", {"train_data": "s3://other-bucket/datasets/a.jsonl"}, BUCKET, "bucket 'other-bucket' is not"),
    ("outside-datasets", {"train_data": f"s3://{BUCKET}/models/a.jsonl"}, BUCKET, "must be under datasets/"),
    ("bare-prefix", {"train_data": f"s3://{BUCKET}/datasets/"}, BUCKET, "must be under datasets/ (not the prefix)"),
    ("dot-dot", {"train_data": f"s3://{BUCKET}/datasets/../models/x"}, BUCKET, "no empty, '.' or '..' segments"),
    ("whitespace", {"train_data": f"s3://{BUCKET}/datasets/a b.jsonl"}, BUCKET, "no whitespace"),
    ("hps-not-object", {"train_data": DATA, "hyperparameters": "lora_r=8"}, BUCKET, "hyperparameters: got 'lora_r=8'"),
    (
        "marker-version-not-string",
        {"train_data": DATA, "dataset_marker_version_id": 7},
        BUCKET,
        "dataset_marker_version_id: got 7; expected the marker's S3 version id (1 to 256 characters)",
    ),
    (
        "unknown-hp",
        {"train_data": DATA, "hyperparameters": {"lora_rank": 8}},
        BUCKET,
        "hyperparameters.lora_rank: unknown hyperparameter; train.py accepts:",
    ),
    (
        "reserved-hp",
        {"train_data": DATA, "hyperparameters": {"output_dir": "/tmp"}},
        BUCKET,
        "hyperparameters.output_dir: is set by SageMaker",
    ),
    (
        "hp-bad-int",
        {"train_data": DATA, "hyperparameters": {"lora_r": "eight"}},
        BUCKET,
        "hyperparameters.lora_r: got 'eight'; train.py expects an integer",
    ),
    (
        "hp-bad-choice",
        {"train_data": DATA, "hyperparameters": {"compute_dtype": "int8"}},
        BUCKET,
        "hyperparameters.compute_dtype: got 'int8'; allowed: bfloat16, float16, float32",
    ),
    (
        "hp-bad-bool",
        {"train_data": DATA, "hyperparameters": {"merge": "maybe"}},
        BUCKET,
        "hyperparameters.merge: got 'maybe'; train.py expects a boolean",
    ),
    (
        "hp-json-bool",
        {"train_data": DATA, "hyperparameters": {"merge": True}},
        BUCKET,
        "hyperparameters.merge: got True; expected a string or a number",
    ),
    (
        "no-merge",
        {"train_data": DATA, "hyperparameters": {"merge": "false"}},
        BUCKET,
        "hyperparameters.merge: got 'false'; the workflow records the job's model folder as the servable model",
    ),
    (
        "no-merge-other-spelling",
        {"train_data": DATA, "hyperparameters": {"merge": "Off"}},
        BUCKET,
        "hyperparameters.merge: got 'Off'; the workflow records",
    ),
    (
        "eval-outside-datasets",
        {"train_data": DATA, "eval_data": f"s3://{BUCKET}/models/e.jsonl"},
        BUCKET,
        "eval_data: got 's3://llm-inf2-dev-data-artifactbucket-abc123/models/e.jsonl'; the key must be under datasets/",
    ),
    (
        "eval-wrong-bucket",
        {"train_data": DATA, "eval_data": "s3://other-bucket/datasets/e.jsonl"},
        BUCKET,
        "eval_data: bucket 'other-bucket' is not the artifact bucket",
    ),
    ("eval-not-string", {"train_data": DATA, "eval_data": None}, BUCKET, "eval_data: got None; expected an s3://"),
    (
        "hp-list",
        {"train_data": DATA, "hyperparameters": {"target_modules": ["q_proj"]}},
        BUCKET,
        "expected a string or a number",
    ),
    (
        "hp-help",
        {"train_data": DATA, "hyperparameters": {"help": "1"}},
        BUCKET,
        "hyperparameters.help: unknown hyperparameter",
    ),
    (
        "deeper-marker",
        {"train_data": f"s3://{BUCKET}/datasets/guanaco/v2/_READY"},
        BUCKET,
        "train_data: got 's3://llm-inf2-dev-data-artifactbucket-abc123/datasets/guanaco/v2/_READY'; a dataset "
        "completion marker must be datasets/<name>/_READY (one folder under datasets/)",
    ),
    (
        "marker-under-datasets",
        {"train_data": f"s3://{BUCKET}/datasets/_READY"},
        BUCKET,
        "a dataset completion marker must be datasets/<name>/_READY",
    ),
    (
        "eval-marker",
        {"train_data": DATA, "eval_data": f"s3://{BUCKET}/datasets/guanaco/_READY"},
        BUCKET,
        "eval_data: got 's3://llm-inf2-dev-data-artifactbucket-abc123/datasets/guanaco/_READY'; give the dataset "
        "folder",
    ),
]


@pytest.mark.parametrize(("case", "data", "bucket", "expected"), REJECTED, ids=[c[0] for c in REJECTED])
def test_rejected_with_one_line(case, data, bucket, expected):
    with pytest.raises(InputError) as err:
        validate_execution_input(data, bucket=bucket)
    assert expected in str(err.value)
    assert "\n" not in str(err.value)


def test_valid_input_is_normalized_to_strings():
    checked = validate_execution_input(
        {"train_data": DATA, "hyperparameters": {"lora_r": 16, "learning_rate": 1e-4, "merge": "True"}}, bucket=BUCKET
    )
    assert checked == {
        "train_data": DATA,
        "hyperparameters": {"learning_rate": "0.0001", "lora_r": "16", "merge": "True"},
    }
    assert validate_execution_input({"train_data": DATA}, bucket=None)["hyperparameters"] == {}


def test_eval_data_is_optional_and_kept():
    eval_data = f"s3://{BUCKET}/datasets/guanaco/eval.jsonl"
    checked = validate_execution_input({"train_data": DATA, "eval_data": eval_data}, bucket=BUCKET)
    assert checked == {"train_data": DATA, "eval_data": eval_data, "hyperparameters": {}}
    assert "eval_data" not in validate_execution_input({"train_data": DATA}, bucket=BUCKET)


def test_a_completion_marker_stands_for_its_folder():
    """What the EventBridge rule passes, sent as the folder (the state machine's DatasetMarker does the same)."""
    marker = {"train_data": f"s3://{BUCKET}/datasets/guanaco/_READY", "hyperparameters": {"lora_r": "8"}}
    checked = validate_execution_input(marker, bucket=BUCKET)
    assert checked == {"train_data": f"s3://{BUCKET}/datasets/guanaco/", "hyperparameters": {"lora_r": "8"}}
    assert validate_execution_input(checked, bucket=BUCKET) == checked
    not_a_marker = f"s3://{BUCKET}/datasets/guanaco/x_READY"
    assert validate_execution_input({"train_data": not_a_marker}, bucket=BUCKET)["train_data"] == not_a_marker


def test_folder_of_files_is_accepted():
    assert validate_execution_input({"train_data": f"s3://{BUCKET}/datasets/guanaco/"}, bucket=BUCKET)


def test_names_come_from_the_training_code():
    names = set(hyperparameter_names())
    brief = {
        "model_id",
        "eval_fraction",
        "max_steps",
        "epochs",
        "learning_rate",
        "per_device_batch_size",
        "gradient_accumulation_steps",
        "max_seq_length",
        "lora_r",
        "lora_alpha",
        "lora_dropout",
        "target_modules",
        "compute_dtype",
        "packing",
        "seed",
        "merge",
    }
    assert brief <= names
    assert not names & RESERVED
    assert hyperparameter_problem("epochs", "1.5") is None


def _run(*args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ)
    # Any AWS call would go to a closed port and fail differently: these must fail before one is made.
    env.update(
        AWS_ENDPOINT_URL="http://127.0.0.1:9",
        AWS_ACCESS_KEY_ID="x",
        AWS_SECRET_ACCESS_KEY="x",
        AWS_DEFAULT_REGION="us-east-1",
    )
    return subprocess.run(
        [sys.executable, "tools/start_training.py", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["--data", "s3://b-1/models/x"], "train_data: got 's3://b-1/models/x'; the key must be under datasets/"),
        (["--data", DATA, "--set", "lora_rank=8"], "hyperparameters.lora_rank: unknown hyperparameter"),
        (["--data", DATA, "--set", "lora_r"], "--set 'lora_r': expected NAME=VALUE"),
        (["--data", DATA, "--set", "merge=false"], "hyperparameters.merge: got 'false'; the workflow records"),
        (["--data", DATA, "--set", "fsdp=true"], "hyperparameters.fsdp: got 'true'; FSDP shards the model over"),
        (["--input", '{"train_data": 1'], "--input: not JSON"),
        (["--input", json.dumps({"train_data": DATA, "x": 1})], "x: unknown key"),
        ([], "--data s3://<artifact bucket>/datasets/... is required"),
        (["--env", "qa", "--data", DATA], "qa.yaml: env: no such file"),
    ],
    ids=[
        "outside-datasets",
        "unknown-hp",
        "bad-set",
        "no-merge",
        "fsdp-one-gpu",
        "bad-json",
        "unknown-key",
        "no-data",
        "unknown-env",
    ],
)
def test_cli_rejects_before_any_aws_call(args, expected):
    result = _run(*args)
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("start_training: error: "), result.stderr
    assert expected in lines[0]


def test_cli_dry_run_prints_the_normalized_input():
    result = _run("--data", DATA, "--set", "lora_r=16", "--dry-run")
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == {"train_data": DATA, "hyperparameters": {"lora_r": "16"}}


def test_cli_sends_a_marker_as_its_folder():
    result = _run("--data", f"s3://{BUCKET}/datasets/guanaco/_READY", "--dry-run")
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["train_data"] == f"s3://{BUCKET}/datasets/guanaco/"


def test_cli_eval_data_goes_into_the_input():
    eval_data = f"s3://{BUCKET}/datasets/guanaco/eval/"
    result = _run("--data", DATA, "--eval-data", eval_data, "--dry-run")
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == {"train_data": DATA, "eval_data": eval_data, "hyperparameters": {}}
    bad = _run("--data", DATA, "--eval-data", f"s3://{BUCKET}/datasets/", "--dry-run")
    assert bad.returncode == 2 and "eval_data: got" in bad.stderr and "not the prefix" in bad.stderr


def test_aws_failure_is_one_line():
    result = _run("--data", DATA)
    assert result.returncode == 1
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("start_training: aws error: ")


MULTI_GPU = TrainingConfig(instance_type="ml.g5.12xlarge", instance_count=2)


@pytest.mark.parametrize(
    ("overrides", "expected"),
    [
        ({"method": "lora"}, "hyperparameters.method: got 'lora'; ml.g5.12xlarge x 2 (8 GPUs) runs torchrun"),
        (
            {"sagemaker_torch_distributed_enabled": "false"},
            "hyperparameters.sagemaker_torch_distributed_enabled: set by the stack",
        ),
    ],
    ids=["lora-on-8-gpus", "launcher-by-hand"],
)
def test_job_shape_rules_apply_to_config_plus_overrides(overrides, expected):
    with pytest.raises(InputError, match=re.escape(expected)):
        validate_execution_input({"train_data": DATA, "hyperparameters": overrides}, bucket=BUCKET, training=MULTI_GPU)


def test_fsdp_override_is_fine_on_several_gpus_and_config_method_counts():
    checked = validate_execution_input(
        {"train_data": DATA, "hyperparameters": {"fsdp": "true"}}, bucket=BUCKET, training=MULTI_GPU
    )
    assert checked["hyperparameters"] == {"fsdp": "true"}
    lora_config = TrainingConfig(hyperparameters={"method": "lora"})  # one GPU: fine, until two instances
    assert validate_execution_input({"train_data": DATA}, bucket=BUCKET, training=lora_config)
    with pytest.raises(InputError, match="hyperparameters.method: got 'lora'; ml.g5.2xlarge x 2"):
        validate_execution_input(
            {"train_data": DATA},
            bucket=BUCKET,
            training=TrainingConfig(instance_count=2, hyperparameters={"method": "lora"}),
        )
