"""Tiny fine-tune, checkpoint resume, one trial, a 10-trial search, Pareto selection and export."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import tarfile

import boto3
import evaluate_subnetwork
import export_models
import export_subnetwork
import pytest
import search_subnetworks
import select_pareto
import torch
import train_supernetwork
from moto import mock_aws
from nas_test_helpers import HANDLER_DIR
from pruning.cli import load_classifier
from pruning.masks import SubnetworkMasks
from pruning.metrics import parse_metrics
from pruning.search_space import SubnetConfig

LOGITS_ATOL = 1e-5
PAIRS = [
    ["On Monday, Anna bought a new bicycle in Paris.", "Anna purchased a bicycle."],
    ["On Friday, Omar sold an old car in Oslo.", "Ben sold an old car."],
]
LOAD_ALONE = """
import json, sys, torch
from transformers import AutoModelForSequenceClassification, AutoTokenizer
folder, pairs = sys.argv[1], json.loads(sys.argv[2])
model = AutoModelForSequenceClassification.from_pretrained(folder, trust_remote_code=True).eval()
tokenizer = AutoTokenizer.from_pretrained(folder)
batch = tokenizer([p[0] for p in pairs], [p[1] for p in pairs], truncation=True, padding=True,
                  max_length=tokenizer.model_max_length, return_tensors="pt")
with torch.no_grad():
    print(json.dumps({"logits": model(**batch).logits.tolist(), "class": type(model).__name__,
                      "parameters": sum(p.numel() for p in model.parameters())}))
"""


pytestmark = pytest.mark.slow


def metric_lines(text: str) -> list[dict]:
    return [m for m in (parse_metrics(line) for line in text.splitlines()) if m]


def start_loading_alone(folder, cwd) -> subprocess.Popen:
    """LOAD_ALONE on ``folder`` in its own process (it spends seconds importing; the caller goes on meanwhile)."""
    command = [sys.executable, "-c", LOAD_ALONE, str(folder), json.dumps(PAIRS)]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}  # two pairs: a second thread would only spin on a busy machine
    return subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=cwd, env=env)


def loaded_alone(process: subprocess.Popen) -> dict:
    try:
        stdout, stderr = process.communicate(timeout=600)
    finally:
        process.kill()
    assert process.returncode == 0, stderr[-3000:]
    return json.loads(stdout.strip().splitlines()[-1])


def test_pipeline_from_fine_tune_to_exported_model(minilm_path, sample_data_dir, tmp_path, capsys):
    data = f"--data-dir {sample_data_dir} --max-rows 16".split()
    supernet, search, selected, export = (tmp_path / name for name in ("supernet", "search", "selected", "export"))
    train = (
        f"--model-name-or-path {minilm_path} --output-dir {supernet} --checkpoint-dir {tmp_path / 'ckpt'} "
        "--strategy kd --search-space per_layer --batch-size 4 --max-length 32 --max-steps 1 "
        "--learning-rate 1e-4 --teacher-epochs 1"
    ).split()
    assert train_supernetwork.main([*data, *train, "--epochs", "2"]) == 0  # teacher, rewire, kd
    assert train_supernetwork.main([*data, *train, "--epochs", "3"]) == 0  # resumes after epoch 2
    logged = capsys.readouterr().out
    assert "at epoch 3" in logged
    epochs = metric_lines(logged)
    assert [m["epoch"] for m in epochs] == [1.0, 2.0, 3.0]
    assert json.loads((supernet / "nas_supernet.json").read_text())["rewired"] is True
    assert set(epochs[0]) == {"epoch", "train_loss", "num_parameters", "validation_error"}
    assert epochs[0]["num_parameters"] == 22_713_986

    trial = f"--model-dir {supernet} --latency-repeats 1 --output-data-dir {tmp_path / 'trial'}".split()
    layers = {0: (6, 200), 1: (0, 30), **{i: (1, 1) for i in range(2, 6)}}  # layers 2.. are dropped
    trial += ["--num_layers", "2"]
    trial += [a for i, (h, u) in layers.items() for a in (f"--num_heads_{i}", str(h), f"--num_units_{i}", str(u))]
    assert evaluate_subnetwork.main([*data, *trial]) == 0
    metrics = metric_lines(capsys.readouterr().out)[-1]
    assert set(metrics) == {"num_parameters", "validation_error", "latency_ms", "macs"} and metrics["latency_ms"] > 0
    evaluation = json.loads((tmp_path / "trial" / "evaluation.json").read_text())
    assert evaluation["subnet"] == {"heads": [6, 0], "units": [200, 30]}

    searching = (
        f"--model-dir {supernet} --output-dir {search} --num-samples 10 --searcher morea --latency-repeats 0 "
        "--objectives validation_error,num_parameters,macs --final-latency-repeats 1"
    )
    assert search_subnetworks.main([*data, *searching.split()]) == 0
    trials = json.loads((search / "trials.json").read_text())
    assert len(trials) == 10 and len((search / "trials.csv").read_text().splitlines()) == 11
    summary = json.loads((search / "pareto.json").read_text())
    assert 0 <= summary["hypervolume"] <= 0.5
    assert summary["reference_point"] == {"validation_error": 0.5, "num_parameters": 1.0, "macs": 1.0}
    assert all(r["macs"] > 0 and "latency_ms" not in r for r in trials if r["status"] == "completed")
    assert all(r["latency_ms_final"] > 0 for r in [summary["unpruned"], *summary["pareto"]])
    sizes = [r["num_parameters"] for r in summary["pareto"]]
    assert sizes == sorted(sizes) and all("test_error" in r for r in summary["pareto"])
    assert (search / "pareto_front.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"

    assert (
        select_pareto.main(
            f"--trials {search / 'trials.csv'} --model-dir {supernet} --output-dir {selected} "
            "--objectives validation_error,num_parameters,macs".split()
        )
        == 0
    )
    reread = json.loads((selected / "pareto.json").read_text())
    assert [r["subnet"] for r in reread["pareto"]] == [r["subnet"] for r in summary["pareto"]]
    assert reread["hypervolume"] == summary["hypervolume"]

    layered = [i for i, r in enumerate(summary["pareto"]) if r["subnet"]["heads"]]
    index = layered[0] if layered else 0
    exporting = (
        f"--model-dir {supernet} --pareto-file {search / 'pareto.json'} --index {index} "
        f"--output-dir {export} --inference-code-dir {HANDLER_DIR}"
    )
    assert export_subnetwork.main(exporting.split()) == 0
    assert (export / "code" / "inference.py").exists()
    chosen = summary["pareto"][index]

    # The exported folder alone (no project code on the path) reproduces the masked super-network; it loads
    # in its own process while this one masks the super-network and runs the stack's export step.
    loading = start_loading_alone(export, tmp_path)
    model, tokenizer = load_classifier(supernet)
    masks = SubnetworkMasks(model)
    first, second = [p[0] for p in PAIRS], [p[1] for p in PAIRS]
    batch = tokenizer(first, second, truncation=True, padding=True, max_length=32, return_tensors="pt")
    with torch.no_grad(), masks.use(SubnetConfig.from_dict(chosen["subnet"])):
        masked = model(**batch).logits

    # The stack's export step: the same pick plus the unpruned network, packed and uploaded for the base endpoint.
    base_uri = "s3://artifacts/pruning/run-1/base/model.tar.gz"
    exporting = (
        f"--model-dir {supernet} --pareto-file {search / 'pareto.json'} --index {index} "
        f"--output-dir {tmp_path / 'job-model'} --base-output-dir {tmp_path / 'base'} "
        f"--base-output-s3-uri {base_uri} --inference-code-dir {HANDLER_DIR}"
    )
    with mock_aws():
        s3 = boto3.client("s3", region_name="us-east-1")
        s3.create_bucket(Bucket="artifacts")
        # gzip level 0: the archive's members are what is checked, not how small it packs
        assert export_models.main(exporting.split(), s3=s3, compresslevel=0) == 0
        archive = s3.get_object(Bucket="artifacts", Key="pruning/run-1/base/model.tar.gz")["Body"].read()
    assert json.loads((tmp_path / "job-model" / "config.json").read_text()) == json.loads(
        (export / "config.json").read_text()
    )
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        names = set(tar.getnames())
        base_config = json.load(tar.extractfile("config.json"))
    assert {"config.json", "model.safetensors", "tokenizer.json", "code/inference.py"} <= names
    assert not any(name.startswith(("/", "base/")) for name in names)  # files at the archive root
    assert base_config["architectures"] == ["BertForSequenceClassification"]
    assert (base_config["num_hidden_layers"], base_config["intermediate_size"]) == (6, 1536)

    result = loaded_alone(loading)
    assert result["parameters"] == chosen["num_parameters"]
    torch.testing.assert_close(torch.tensor(result["logits"]), masked, atol=LOGITS_ATOL, rtol=0)
