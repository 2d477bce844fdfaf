"""int8 dynamic quantization of the exported sub-network: logits close to the fp32 pruned model, the same
in the serving handler as in the export, accuracy re-measured by the export."""

from __future__ import annotations

import importlib.util
import json

import export_models
import export_subnetwork
import pytest
import torch
from nas_test_helpers import HANDLER_DIR, supernet_folder
from pruning.compress import compare_logits, quantize_dynamic_int8
from pruning.data import load_splits, tokenize_pairs
from pruning.export import build_pruned_model, save_pruned_model
from pruning.metrics import parse_metrics
from pruning.search_space import SubnetConfig

# Stated tolerances (int8 weights, one scale per tensor, and int8 activations): the pooled [CLS] vector
# the classifier reads keeps a cosine similarity of at least 0.99 with the fp32 one, and moves by at
# most 10 % of its largest magnitude in any coordinate (observed ~0.08); the logits move by at most 0.01
# (MiniLM with the fixture's untrained head; the trained models' accuracy is re-measured in bench/).
POOLED_MIN_COSINE = 0.99
POOLED_RELATIVE_TOLERANCE = 0.10
LOGIT_TOLERANCE = 0.01
# The exports that re-measure the error pick a small two-layer sub-network: every row of the split still
# runs through the fp32 and the int8 model, without the full layers' arithmetic (most of these tests' time).
REMEASURED_SUBNET = {"heads": [2, 1], "units": [64, 32]}


@pytest.fixture(scope="module")
def handler():
    spec = importlib.util.spec_from_file_location("encoder_classifier_inference_q", HANDLER_DIR / "inference.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def pruned(classifier):
    model, tokenizer = classifier
    return build_pruned_model(model, SubnetConfig((6, 6, 3), (700, 700, 300))), tokenizer


def _batch(tokenizer, sample_data_dir, rows=16):
    pairs = load_splits("jsonl", sample_data_dir)["test"][:rows]
    return dict(tokenize_pairs(tokenizer, [p.sentence1 for p in pairs], [p.sentence2 for p in pairs], 128))


def test_int8_logits_match_the_pruned_model_within_tolerance(pruned, sample_data_dir):
    model, tokenizer = pruned
    quantized = quantize_dynamic_int8(model)
    assert sum(isinstance(m, torch.nn.Linear) for m in model.modules()) > 0
    assert not any(type(m) is torch.nn.Linear for m in quantized.modules())  # every Linear is int8 now
    batch = _batch(tokenizer, sample_data_dir)
    with torch.no_grad():
        reference, compressed = model(**batch), quantized(**batch)
        pooled = model.bert(**batch).pooler_output
        pooled_int8 = quantized.bert(**batch).pooler_output
    drift = float((pooled - pooled_int8).abs().max()) / float(pooled.abs().max())
    cosine = float(torch.nn.functional.cosine_similarity(pooled, pooled_int8, dim=-1).min())
    print(f"pooled drift {drift:.4f}, cosine {cosine:.5f}")
    assert drift <= POOLED_RELATIVE_TOLERANCE and cosine >= POOLED_MIN_COSINE
    torch.testing.assert_close(compressed.logits, reference.logits, rtol=0, atol=LOGIT_TOLERANCE)
    assert not torch.equal(reference.logits, compressed.logits)  # it really runs other arithmetic


def test_handler_serves_the_same_int8_model_as_the_export(handler, pruned, sample_data_dir, tmp_path):
    model, tokenizer = pruned
    metadata = {
        "max_length": 128,
        "labels": ["entailment", "not_entailment"],
        "quantization": {"method": "dynamic_int8"},
    }
    save_pruned_model(model, tokenizer, tmp_path, metadata)
    bundle = handler.model_fn(str(tmp_path))
    batch = _batch(tokenizer, sample_data_dir)
    with torch.no_grad():
        served = bundle["model"](**batch).logits
        exported = quantize_dynamic_int8(model)(**batch).logits
    torch.testing.assert_close(served, exported, rtol=0, atol=0)
    (tmp_path / "nas_export.json").write_text(json.dumps({**metadata, "quantization": {"method": "fp4"}}))
    with pytest.raises(ValueError, match="unknown quantization method 'fp4'"):
        handler.model_fn(str(tmp_path))


def test_export_remeasures_accuracy_after_quantization(minilm_path, sample_data_dir, tmp_path):
    metadata = {
        "max_length": 64,
        "validation_error": 0.5,
        "dataset": "jsonl",
        "split_seed": 42,
        "validation_fraction": 0.3,
    }
    supernet = supernet_folder(minilm_path, tmp_path / "supernet", metadata)
    front = {"pareto": [{"subnet": REMEASURED_SUBNET, "validation_error": 0.4}]}
    (tmp_path / "pareto.json").write_text(json.dumps(front))
    argv = ["--model-dir", str(supernet), "--pareto-file", str(tmp_path / "pareto.json"), "--index", "0"]
    argv += ["--output-dir", str(tmp_path / "out"), "--quantize", "dynamic_int8", "--data-dir", str(sample_data_dir)]
    assert export_subnetwork.main(argv) == 0
    record = json.loads((tmp_path / "out" / "nas_export.json").read_text())["quantization"]
    assert record["method"] == "dynamic_int8" and record["rows"] == 1200  # the whole validation split (30 % of 4,000)
    assert 0 <= record["validation_error"] <= 1 and 0 < record["max_abs_logit_difference"] < 1


def test_the_export_job_remeasures_on_the_training_channel_with_the_supernetworks_split(
    minilm_path, sample_data_dir, tmp_path, monkeypatch, capsys
):
    """The cloud path: export_models.py with the job's SM_CHANNEL_TRAINING and no --data-dir re-measures the
    int8 pick on the split nas_supernet.json records (not the defaults), records it and logs it as a metric."""
    metadata = {
        "max_length": 64,
        "validation_error": 0.5,
        "dataset": "jsonl",
        "split_seed": 7,
        "validation_fraction": 0.2,
    }
    supernet = supernet_folder(minilm_path, tmp_path / "supernet", metadata)
    front = {"pareto": [{"subnet": REMEASURED_SUBNET, "validation_error": 0.4}]}
    (tmp_path / "pareto.json").write_text(json.dumps(front))
    monkeypatch.setenv("SM_CHANNEL_TRAINING", str(sample_data_dir))
    argv = ["--model-dir", str(supernet), "--pareto-file", str(tmp_path / "pareto.json"), "--index", "0"]
    argv += ["--output-dir", str(tmp_path / "out"), "--base-output-dir", str(tmp_path / "base")]
    assert export_models.main([*argv, "--quantize", "dynamic_int8"], compresslevel=0) == 0  # archive unread
    record = json.loads((tmp_path / "out" / "nas_export.json").read_text())["quantization"]
    assert record["rows"] == len(load_splits("jsonl", sample_data_dir, validation_fraction=0.2, seed=7)["validation"])
    assert record["rows"] == 800  # 20 % of 4,000, not the default 30 %
    logged = [parse_metrics(line) for line in capsys.readouterr().out.splitlines()]
    assert [m for m in logged if m] == [{"validation_error": float(f"{record['validation_error']:.6g}")}]
    assert "quantization" not in json.loads((tmp_path / "base" / "nas_export.json").read_text())


def test_compare_logits_counts_errors_of_both_models(pruned, sample_data_dir):
    model, tokenizer = pruned
    pairs = load_splits("jsonl", sample_data_dir)["test"][:8]
    same = compare_logits(model, model, tokenizer, pairs, 64)
    assert same["max_abs_logit_difference"] == 0 and same["validation_error"] == same["validation_error_fp32"]
