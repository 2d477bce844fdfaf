"""The cloud path: recorded tuning-job trials -> select_tuning_job.py -> export_models.py.

The export's error budget is relative to the super-network's own measured validation error, never to the
worst trial (which admitted every front member and exported a chance-level network); parameter counts
arrive as SageMaker's 32-bit floats and are recomputed from each trial's configuration.
"""

from __future__ import annotations

import json
import struct
from pathlib import Path

import export_models
import pytest
import select_pareto
import select_tuning_job
from nas_test_helpers import RecordedSageMaker, supernet_folder
from pruning.params import EncoderShape, count_parameters
from pruning.results import complete_rows, read_trials
from pruning.search_space import ModelDims, SubnetConfig, config_from_hyperparameters

RECORDED = Path(__file__).with_name("recorded") / "tuning_job_trials.json"
BERT_BASE_CASED = {
    "vocab_size": 28996,
    "hidden_size": 768,
    "num_hidden_layers": 12,
    "num_attention_heads": 12,
    "intermediate_size": 3072,
    "max_position_embeddings": 512,
    "type_vocab_size": 2,
    "num_labels": 2,
}


def float32(value: float) -> float:
    return struct.unpack("f", struct.pack("f", value))[0]


@pytest.fixture(scope="module")
def recording() -> dict:
    return json.loads(RECORDED.read_text())


def select(recording, model_dir: Path, out: Path) -> dict:
    select_tuning_job.main(
        ["--tuning-job-name", recording["tuning_job_name"], "--model-dir", str(model_dir), "--output-dir", str(out)],
        sagemaker=RecordedSageMaker(recording),
    )
    return json.loads((out / "pareto.json").read_text())


def export(model_dir: Path, pareto: Path, out: Path, *choice: str) -> dict:
    argv = ["--model-dir", str(model_dir), "--pareto-file", str(pareto), "--output-dir", str(out / "pruned")]
    # No assertion here reads the base archive: gzip level 0 skips seconds of compressing float weights.
    export_models.main([*argv, "--base-output-dir", str(out / "base"), *choice], compresslevel=0)
    return json.loads((out / "pruned" / "nas_export.json").read_text())


def test_parameter_counts_survive_a_float32_round_trip(tmp_path):
    full = SubnetConfig((12,) * 12, (3072,) * 12)
    exact = count_parameters(EncoderShape.from_config(BERT_BASE_CASED), full)
    assert exact == 108_311_810 and float32(exact) == 108_311_808  # what SageMaker hands back
    job = {
        "TrainingJobName": "t-001",
        "TrainingJobStatus": "Completed",
        "TunedHyperParameters": {"num_layers": "12", "num_heads": "12", "num_units": "3072"},
        "FinalMetricDataList": [
            {"MetricName": "validation_error", "Value": float32(0.33)},
            {"MetricName": "num_parameters", "Value": float32(exact)},
        ],
    }
    (tmp_path / "jobs.json").write_text(json.dumps([job]))
    shape = EncoderShape.from_config(BERT_BASE_CASED)
    rows = complete_rows(
        read_trials(tmp_path / "jobs.json"),
        "uniform",
        ModelDims.from_config(BERT_BASE_CASED),
        ("validation_error", "num_parameters"),
        shape,
    )
    assert rows[0]["num_parameters"] == 108_311_810
    assert rows[0]["num_parameters_reported"] == 108_311_808


def test_recording_holds_real_float32_metrics_and_the_real_full_network_count(recording):
    values = [m["Value"] for d in recording["describe"].values() for m in d["FinalMetricDataList"]]
    assert values and all(float32(v) == v for v in values)
    full = [d for d in recording["describe"].values() if d["HyperParameters"].get("num_units") == "1536"]
    (counts,) = [[m["Value"] for m in d["FinalMetricDataList"] if m["MetricName"] == "num_parameters"] for d in full]
    assert counts == [22_713_986]  # MiniLM-L6 with a 2-label head, as sum(p.numel()) counts it


@pytest.mark.parametrize("increase", [0.01, 0.15])
def test_export_budget_is_relative_to_the_supernetwork_not_the_worst_trial(recording, minilm_path, tmp_path, increase):
    metadata = recording["supernet_metadata"]
    supernet = supernet_folder(minilm_path, tmp_path / "supernet", metadata)
    summary = select(recording, supernet, tmp_path / "pareto")
    assert summary["unpruned"]["validation_error"] == metadata["validation_error"]
    assert summary["unpruned"]["validation_error_source"] == "nas_supernet.json"
    front = summary["pareto"]
    worst = max(r["validation_error"] for r in front)
    budget = metadata["validation_error"] + increase
    assert front[0]["validation_error"] > budget, "the recording's smallest member is at chance level"

    exported = export(supernet, tmp_path / "pareto" / "pareto.json", tmp_path, "--max-error-increase", str(increase))
    assert exported["selection"]["reference_error"] == metadata["validation_error"]
    assert exported["validation_error"] <= budget < worst
    within = [r for r in front if r["validation_error"] <= budget]
    assert exported["num_parameters"] == min(r["num_parameters"] for r in within)
    assert exported["subnet"] != front[0]["subnet"]
    if increase > 0.1:  # a wider budget admits the 6 x 3 x 207 pruned network, still not the chance-level one
        assert exported["subnet"] == {"heads": [3] * 6, "units": [207] * 6}


def test_without_a_measured_reference_the_budget_pick_refuses(recording, minilm_path, tmp_path):
    supernet = supernet_folder(minilm_path, tmp_path / "supernet", None)
    without_full = json.loads(json.dumps(recording))
    full = [n for n, d in without_full["describe"].items() if d["HyperParameters"]["num_layers"] == "6"
            and d["HyperParameters"]["num_heads"] == "12"]  # fmt: skip
    for name in full:
        del without_full["describe"][name]
    for page in without_full["list_pages"]:
        page["TrainingJobSummaries"] = [s for s in page["TrainingJobSummaries"] if s["TrainingJobName"] not in full]
    summary = select(without_full, supernet, tmp_path / "pareto")
    assert "validation_error" not in summary["unpruned"]
    with pytest.raises(SystemExit, match="unpruned network's validation error"):
        export(supernet, tmp_path / "pareto" / "pareto.json", tmp_path, "--max-error-increase", "0.01")


def test_a_full_network_trial_is_the_reference_when_there_is_no_metadata(recording, minilm_path, tmp_path):
    supernet = supernet_folder(minilm_path, tmp_path / "supernet", None)
    summary = select(recording, supernet, tmp_path / "pareto")
    assert summary["unpruned"]["validation_error_source"].startswith("full-network trial")
    full = [r for r in json.loads((tmp_path / "pareto" / "trials.json").read_text())
            if r.get("subnet") == summary["unpruned"]["subnet"]]  # fmt: skip
    assert summary["unpruned"]["validation_error"] == full[0]["validation_error"]


def test_unpruned_json_wins(recording, minilm_path, tmp_path):
    supernet = supernet_folder(minilm_path, tmp_path / "supernet", recording["supernet_metadata"])
    trials = tmp_path / "trials.json"
    trials.write_text(json.dumps({"TrainingJobs": list(recording["describe"].values())}))
    reference = tmp_path / "evaluation.json"
    reference.write_text(json.dumps({"validation_error": 0.125, "num_parameters": 22_713_986}))
    out = tmp_path / "pareto"
    select_pareto.main(
        ["--trials", str(trials), "--model-dir", str(supernet), "--unpruned-json", str(reference),
         "--output-dir", str(out)]
    )  # fmt: skip
    assert json.loads((out / "pareto.json").read_text())["unpruned"]["validation_error"] == 0.125


def test_macs_survive_a_float32_round_trip():
    from pruning.params import count_macs, tokens_for_macs

    shape = EncoderShape.from_config(BERT_BASE_CASED)
    subnet = SubnetConfig((5,) * 9, (1001,) * 9)
    exact = count_macs(shape, subnet, 97)
    assert float32(exact) != exact
    (row,) = complete_rows(
        [{"trial_id": 1, "status": "completed", "subnet": subnet.to_dict(), "validation_error": 0.3,
          "num_parameters": 1.0, "macs": float32(exact)}],
        "uniform", ModelDims.from_config(BERT_BASE_CASED), ("validation_error", "macs"), shape,
    )  # fmt: skip
    assert (row["macs"], row["macs_tokens"]) == (exact, 97)
    assert tokens_for_macs(shape, SubnetConfig((), ()), 5.0) is None


@pytest.fixture(scope="module")
def macs_tokens(recording, minilm_path, sample_data_dir) -> int:
    """The length the trials count MACs at: evaluate_subnetwork.py's mean tokenized length of the super-network's
    validation split (the recording's split and max length, and its trials' --max-rows 640)."""
    import argparse

    from pruning.cli import load_data
    from pruning.evaluation import mean_tokens
    from transformers import AutoTokenizer

    metadata = recording["supernet_metadata"]
    split = argparse.Namespace(
        data_dir=str(sample_data_dir),
        max_rows=640,
        dataset=metadata["dataset"],
        split_seed=metadata["split_seed"],
        validation_fraction=metadata["validation_fraction"],
    )
    tokenizer = AutoTokenizer.from_pretrained(str(minilm_path))
    return mean_tokens(tokenizer, load_data(split)["validation"], metadata["max_length"])


def with_macs_metric(recording: dict, shape: EncoderShape, tokens: int) -> dict:
    """The recording with the ``macs`` metric the trials log (the recording itself has none), as SageMaker
    keeps it: a 32-bit float, on every trial that logged metrics (failed 002 too)."""
    from pruning.params import count_macs
    from pruning.search_space import config_from_hyperparameters

    dims = ModelDims(**recording["supernet_metadata"]["dims"])
    changed = json.loads(json.dumps(recording))
    for described in changed["describe"].values():
        if described["FinalMetricDataList"]:
            tuned = {k: v for k, v in described["HyperParameters"].items() if k.startswith("num_")}
            subnet = config_from_hyperparameters("uniform", tuned, dims)
            described["FinalMetricDataList"].append(
                {"MetricName": "macs", "Value": float32(count_macs(shape, subnet, tokens))}
            )
    return changed


@pytest.mark.parametrize("objectives", ["validation_error,macs", "validation_error,num_parameters,macs"])
@pytest.mark.parametrize("increase", [0.01, 0.15])
def test_macs_selection_and_export_pick_the_fewest_macs_within_the_budget(
    recording, minilm_path, macs_tokens, tmp_path, objectives, increase
):
    """pruning.objectives validation_error,macs (or with num_parameters) + pruning.minimise macs: MACs are
    recomputed exactly from each trial's configuration at the length the trials counted them at (never the
    float32 metric), and the export's pick has the fewest MACs among completed trials within the budget
    above the super-network's own error."""
    from pruning.cli import read_json
    from pruning.params import count_macs
    from pruning.search_space import largest_config

    metadata = recording["supernet_metadata"]
    supernet = supernet_folder(minilm_path, tmp_path / "supernet", metadata)
    shape = EncoderShape.from_config(read_json(supernet / "config.json"))
    cloud = with_macs_metric(recording, shape, macs_tokens)
    select_tuning_job.main(
        ["--tuning-job-name", cloud["tuning_job_name"], "--model-dir", str(supernet), "--output-dir",
         str(tmp_path / "pareto"), "--objectives", objectives, "--search-space", "uniform"],
        sagemaker=RecordedSageMaker(cloud),
    )  # fmt: skip
    summary = json.loads((tmp_path / "pareto" / "pareto.json").read_text())
    assert summary["objectives"] == objectives.split(",") and summary["hypervolume"] > 0
    # (MiniLM's counts are multiples of 384 and survive float32; test_macs_survive_a_float32_round_trip has one
    # that does not): the rows hold the count of their configuration at the length the trials recorded
    for row in summary["pareto"]:
        assert row["macs"] == count_macs(shape, SubnetConfig.from_dict(row["subnet"]), macs_tokens)
        assert row["macs_tokens"] == macs_tokens
    unpruned = summary["unpruned"]
    full = largest_config(ModelDims(**metadata["dims"]))
    assert unpruned["macs"] == count_macs(shape, full, macs_tokens)
    assert (unpruned["validation_error"], unpruned["validation_error_source"]) == (
        metadata["validation_error"],
        "nas_supernet.json",
    )

    exported = export(
        supernet,
        tmp_path / "pareto" / "pareto.json",
        tmp_path,
        "--max-error-increase",
        str(increase),
        "--minimise",
        "macs",
    )
    budget = metadata["validation_error"] + increase
    assert exported["selection"] == {
        "minimise": "macs",
        "reference_error": metadata["validation_error"],
        "reference_source": "nas_supernet.json",
        "max_error_increase": increase,
        "max_error": budget,
    }
    # independent of the front: every completed recorded trial within the budget, MACs counted from its tuned values
    candidates = []
    for described in recording["describe"].values():
        metrics = {m["MetricName"]: m["Value"] for m in described["FinalMetricDataList"]}
        if described["TrainingJobStatus"] == "Completed" and metrics["validation_error"] <= budget:
            tuned = {k: v for k, v in described["HyperParameters"].items() if k.startswith("num_")}
            subnet = config_from_hyperparameters("uniform", tuned, ModelDims(**metadata["dims"]))
            candidates.append((count_macs(shape, subnet, macs_tokens), subnet.to_dict()))
    fewest, subnet = min(candidates, key=lambda c: c[0])
    assert (exported["macs"], exported["subnet"]) == (fewest, subnet)
    assert exported["validation_error"] <= budget
    if increase > 0.1:  # the 6 x 3 x 207 network: fewer MACs than the full one, unlike the chance-level members
        assert subnet == {"heads": [3] * 6, "units": [207] * 6}
    else:
        assert subnet == full.to_dict()
