"""benchmark.py, the benchmark evaluation job: run as SageMaker runs it (the training toolkit's `train` with the
PyTorch framework module, through the local job runner), on two tiny Llamas and the shipped task, and its refusal of
a task whose files are not staged. Expected scores come from lm-eval itself and from the task's own rows."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from finetune.benchmark.contract import MAX_DROP, SCORES_FILE, metric_definitions, metric_key
from finetune.benchmark.tasks import NotStaged, staged_task
from qlora_test_helpers import QLORA_DIR

EVAL_DATA = QLORA_DIR.parent / "eval_data"
TASK = "everyday_facts"
BUCKET = "benchmark-job"
# A PyTorch framework image: the runner starts the toolkit with sagemaker_pytorch_container.training, as there.
IMAGE = "763104351884.dkr.ecr.us-east-1.amazonaws.com/huggingface-pytorch-training:2.1.0-transformers4.36.0-gpu-py310"


def _rows() -> list[dict]:
    return [json.loads(line) for line in (EVAL_DATA / TASK / "test.jsonl").read_text().splitlines()]


def _tiny(folder: Path, seed: int) -> Path:
    """A tiny Llama whose tokenizer learnt the task's words; the same tokenizer for every seed."""
    from finetune.tiny import build_tiny_llama

    texts = [" ".join([row["question"], *row["choices"]]) for row in _rows()]
    return build_tiny_llama(folder, texts, vocab_size=384, seed=seed)


def _request(name: str) -> dict:
    def channel(channel_name: str, prefix: str) -> dict:
        source = {
            "S3DataType": "S3Prefix",
            "S3Uri": f"s3://{BUCKET}/{prefix}",
            "S3DataDistributionType": "FullyReplicated",
        }
        return {"ChannelName": channel_name, "DataSource": {"S3DataSource": source}}

    return {
        "TrainingJobName": name,
        "HyperParameters": {
            "tasks": TASK,
            "batch_size": "16",
            "sagemaker_program": '"benchmark.py"',
            "sagemaker_submit_directory": f'"s3://{BUCKET}/code/sourcedir.tar.gz"',
        },
        "AlgorithmSpecification": {
            "TrainingImage": IMAGE,
            "TrainingInputMode": "File",
            "MetricDefinitions": metric_definitions({TASK: "acc"}),
        },
        "InputDataConfig": [
            channel("model", "models/tuned/"),
            channel("base", "base-models/tiny/"),
            channel("tasks", "eval-data/"),
        ],
        "OutputDataConfig": {"S3OutputPath": f"s3://{BUCKET}/benchmarks", "CompressionType": "NONE"},
        "ResourceConfig": {"InstanceType": "ml.g5.xlarge", "InstanceCount": 1, "VolumeSizeInGB": 30},
        "StoppingCondition": {"MaxRuntimeInSeconds": 300},
        "Environment": {"OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1", "TQDM_DISABLE": "1"},
    }


@pytest.fixture(scope="module")
def job(tmp_path_factory):
    """One job run through the toolkit: its outcome, its benchmark.json (from S3) and the two models."""
    import boto3

    from local.emulator.job_runner import LocalJobRunner
    from local.emulator.s3_folders import upload_folder
    from stacks.shared.assets import tarball_bytes
    from tests.tools.moto_server import loopback_moto_server

    root = tmp_path_factory.mktemp("benchmark")
    base, tuned = _tiny(root / "base", seed=0), _tiny(root / "tuned", seed=1)
    with loopback_moto_server() as url:
        s3 = boto3.client(
            "s3", endpoint_url=url, region_name="us-east-1", aws_access_key_id="t", aws_secret_access_key="t"
        )
        s3.create_bucket(Bucket=BUCKET)
        s3.put_object(Bucket=BUCKET, Key="code/sourcedir.tar.gz", Body=tarball_bytes(QLORA_DIR))
        upload_folder(s3, base, BUCKET, "base-models/tiny/")
        upload_folder(s3, tuned, BUCKET, "models/tuned/")
        upload_folder(s3, EVAL_DATA, BUCKET, "eval-data/")
        runner = LocalJobRunner(endpoint_url=url, region="us-east-1", work_root=root / "jobs")
        outcome = runner.run(
            _request("bench-1"), job_arn="arn:aws:sagemaker:us-east-1:123456789012:training-job/bench-1"
        )
        assert outcome.status == "Completed", (outcome.failure_reason, outcome.log[-20:])
        body = s3.get_object(Bucket=BUCKET, Key=f"benchmarks/bench-1/output/model/{SCORES_FILE}")["Body"].read()
    return outcome, json.loads(body), base, tuned


def _lm_eval_accuracy(model: Path) -> float:
    """The shipped task scored by lm-eval directly, from its YAML with the data file's path made absolute."""
    import yaml
    from lm_eval import simple_evaluate
    from lm_eval.tasks import TaskManager

    config = yaml.safe_load((EVAL_DATA / TASK / f"{TASK}.yaml").read_text())
    config["dataset_kwargs"] = {"data_files": {"test": str(EVAL_DATA / TASK / "test.jsonl")}}
    results = simple_evaluate(
        model="hf",
        model_args={"pretrained": str(model)},
        tasks=[config],
        task_manager=TaskManager(include_defaults=False),
        device="cpu",
        batch_size=16,
        bootstrap_iters=0,
    )
    return results["results"][TASK]["acc,none"]


@pytest.mark.slow
def test_the_job_scores_every_row_of_the_task_for_both_models(job):
    _, scores, _, _ = job
    entry = scores["tasks"][TASK]
    assert entry["docs"] == {"base": len(_rows()), "tuned": len(_rows())} == {"base": 32, "tuned": 32}
    assert entry["primary_metric"] == "acc" and set(entry["metrics"]) == {"acc", "acc_norm"}
    assert scores["lm_eval_version"] == __import__("importlib.metadata").metadata.version("lm-eval")


@pytest.mark.slow
def test_the_scores_are_lm_eval_s_and_the_drop_is_base_minus_tuned_in_points(job):
    _, scores, base, tuned = job
    acc = scores["tasks"][TASK]["metrics"]["acc"]
    assert (acc["base"], acc["tuned"]) == (_lm_eval_accuracy(base), _lm_eval_accuracy(tuned))
    assert acc["drop_points"] == pytest.approx(100 * (acc["base"] - acc["tuned"]))
    assert scores[MAX_DROP] == acc["drop_points"] and scores["max_drop_task"] == TASK


@pytest.mark.slow
def test_sagemaker_s_metric_definitions_read_the_job_s_lines(job):
    outcome, scores, _, _ = job
    acc = scores["tasks"][TASK]["metrics"]["acc"]
    expected = {metric_key(TASK, "acc", side): acc[side] for side in ("base", "tuned", "drop_points")}
    assert outcome.metrics == pytest.approx({**expected, MAX_DROP: scores[MAX_DROP]}, abs=1e-5)


@pytest.mark.parametrize(
    ("folder", "problem"),
    [
        ("empty", "not staged: no {root}/arc_easy/arc_easy.yaml (with the data files it names)"),
        ("no_data", "not staged: {root}/arc_easy/test.jsonl missing (named by arc_easy.yaml)"),
        (
            "hub",
            "{root}/arc_easy/arc_easy.yaml reads dataset 'allenai/ai2_arc' from the hub, which the job may not reach",
        ),
    ],
)
def test_a_task_whose_files_are_not_staged_is_refused_before_any_model_loads(tmp_path, folder, problem):
    from finetune.benchmark.args import parse_args
    from finetune.benchmark.run import run

    root = tmp_path / folder
    (root / "arc_easy").mkdir(parents=True)
    shipped = (EVAL_DATA / TASK / f"{TASK}.yaml").read_text().replace(TASK, "arc_easy")
    if folder == "no_data":
        (root / "arc_easy" / "arc_easy.yaml").write_text(shipped)
    if folder == "hub":
        (root / "arc_easy" / "arc_easy.yaml").write_text(
            shipped.replace("dataset_path: json", "dataset_path: allenai/ai2_arc")
        )
    argv = ["--tasks", "arc_easy", "--model", "no/such-model", "--base", "no/such-base", "--tasks_dir", str(root)]
    failure = tmp_path / "output" / "failure"  # SM_OUTPUT_DIR/failure in a job: its FailureReason
    with pytest.raises(SystemExit) as refused:
        run(parse_args([*argv, "--output_dir", str(tmp_path / "out"), "--failure_file", str(failure)]))
    line = (
        f"benchmark task 'arc_easy': {problem.format(root=root)}; stage it with "
        "`make eval-data TASK=arc_easy ENV=<env>` (s3://<bucket>/eval-data/arc_easy/, the `tasks` channel) or, "
        "for a local run, copy such a folder into --tasks_dir"
    )
    assert (str(refused.value.code), failure.read_text()) == (f"benchmark.py: error: {line}", line)
    assert not (tmp_path / "out").exists()  # and no model was looked for: neither name exists anywhere


def test_the_shipped_task_resolves_its_files_beside_its_yaml():
    config = staged_task(str(EVAL_DATA), TASK)
    assert config["dataset_kwargs"]["data_files"] == {"test": [str(EVAL_DATA / TASK / "test.jsonl")]}
    with pytest.raises(NotStaged):
        staged_task(None, TASK)


def test_the_card_beside_the_scores_is_the_model_s_card_with_every_compared_figure(tmp_path):
    """The figures of a benchmark.json as run.py writes it (the local pipeline's run on the tiny model)."""
    from finetune.benchmark.card import write_benchmark_card

    model = tmp_path / "model"
    model.mkdir()
    (model / "README.md").write_text('---\nlicense: "unknown"\n---\n\n# Fine-tune of tiny\n')
    scores = {
        "lm_eval_version": "0.4.13",
        "num_fewshot": None,
        "limit": None,
        MAX_DROP: 0.0,
        "max_drop_task": TASK,
        "tasks": {
            TASK: {
                "primary_metric": "acc",
                "metrics": {
                    "acc": {"base": 0.09375, "tuned": 0.09375, "drop_points": 0.0},
                    "acc_norm": {"base": 0.25, "tuned": 0.15625, "drop_points": 9.375},
                },
            }
        },
    }
    (tmp_path / "out").mkdir()
    card = write_benchmark_card(tmp_path / "out", str(model), scores)
    text = card.read_text()
    assert card.name == "README.md" and text.startswith('---\nlicense: "unknown"\n---\n\n# Fine-tune of tiny\n')
    assert f"| {TASK} | acc (primary) | 0.0938 | 0.0938 | 0.0000 |" in text
    assert f"| {TASK} | acc_norm | 0.2500 | 0.1562 | 9.3750 |" in text
    assert f"{MAX_DROP}: 0 ({TASK}). Full record: `{SCORES_FILE}`." in text
