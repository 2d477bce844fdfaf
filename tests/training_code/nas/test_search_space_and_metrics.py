"""Search spaces, SageMaker parameter ranges and metric regexes: the contract with the CDK stacks."""

from __future__ import annotations

import json
import random
import subprocess
import sys

import pytest
from nas_test_helpers import NAS_DIR
from pruning.metrics import METRIC_DEFINITIONS, format_metrics, parse_metrics
from pruning.search_space import (
    ModelDims,
    SubnetConfig,
    config_from_hyperparameters,
    head_divisors,
    parameter_specs,
    sagemaker_parameter_ranges,
    sample_config,
    smallest_config,
)

BERT_BASE = ModelDims(12, 12, 3072)
MINILM = ModelDims(6, 12, 1536)


@pytest.mark.parametrize(
    "module",
    ["pruning.search_space", "pruning.metrics", "pruning.params", "pruning.pareto", "pruning.results", "select_pareto"],
)
def test_module_imports_without_torch_or_numpy(module):
    blocked = ("torch", "transformers", "numpy", "syne_tune")
    blocker = f"import sys\nfor name in {blocked!r}:\n    sys.modules[name] = None\n"
    code = f"{blocker}sys.path.insert(0, {str(NAS_DIR)!r})\nimport {module}\n"
    subprocess.run([sys.executable, "-c", code], check=True)


def test_uniform_ranges_are_the_seed_space_in_sagemaker_form():
    ranges = sagemaker_parameter_ranges("uniform", 12, 12, 3072)
    integer = {r["Name"]: r for r in ranges["IntegerParameterRanges"]}
    assert integer["num_layers"]["MinValue"] == "0" and integer["num_layers"]["MaxValue"] == "12"
    assert integer["num_units"]["MinValue"] == "0" and integer["num_units"]["MaxValue"] == "3072"
    assert ranges["CategoricalParameterRanges"] == [{"Name": "num_heads", "Values": ["1", "2", "3", "4", "6", "12"]}]
    for r in ranges["IntegerParameterRanges"]:
        assert all(isinstance(r[k], str) for k in ("MinValue", "MaxValue"))
    json.dumps(ranges)


def test_per_layer_ranges_name_every_layer():
    ranges = sagemaker_parameter_ranges("per_layer", 6, 12, 1536)
    names = [r["Name"] for r in ranges["IntegerParameterRanges"]]
    assert names[0] == "num_layers"
    assert {f"num_heads_{i}" for i in range(6)} | {f"num_units_{i}" for i in range(6)} == set(names[1:])
    assert "CategoricalParameterRanges" not in ranges


@pytest.mark.parametrize("space", ["uniform", "per_layer"])
def test_range_names_are_the_evaluation_script_flags(space, tmp_path):
    import evaluate_subnetwork

    (tmp_path / "config.json").write_text(
        json.dumps({"num_hidden_layers": 6, "num_attention_heads": 12, "intermediate_size": 1536})
    )
    ranges = sagemaker_parameter_ranges(space, 6, 12, 1536)
    argv = ["--model-dir", str(tmp_path), "--search-space", space]
    for r in ranges["IntegerParameterRanges"]:
        argv += [f"--{r['Name']}", r["MaxValue"]]
    for r in ranges.get("CategoricalParameterRanges", []):
        argv += [f"--{r['Name']}", r["Values"][-1]]
    args, dims = evaluate_subnetwork.parse_args(argv)
    assert dims == MINILM
    values = {r["Name"]: args.subnetwork[r["Name"]] for r in ranges["IntegerParameterRanges"]}
    config = config_from_hyperparameters(space, {**values, "num_heads": 12}, dims)
    assert config == SubnetConfig((12,) * 6, (1536,) * 6)
    with pytest.raises(SystemExit):  # a missing sub-network hyperparameter is an error, not a default
        evaluate_subnetwork.parse_args(argv[:-2])


def test_hyperparameters_as_strings_and_validation():
    config = config_from_hyperparameters("uniform", {"num_layers": "3", "num_heads": "6", "num_units": "0"}, MINILM)
    assert config == SubnetConfig((6, 6, 6), (0, 0, 0))
    with pytest.raises(ValueError, match="num_units"):
        config_from_hyperparameters("uniform", {"num_layers": 2, "num_heads": 6, "num_units": 1537}, MINILM)
    with pytest.raises(ValueError, match="missing"):
        config_from_hyperparameters("per_layer", {"num_layers": 2}, MINILM)
    per_layer = {
        "num_layers": 2,
        **{f"num_heads_{i}": i for i in range(6)},
        **{f"num_units_{i}": 10 * i for i in range(6)},
    }
    assert config_from_hyperparameters("per_layer", per_layer, MINILM) == SubnetConfig((0, 1), (0, 10))


def test_samples_stay_inside_the_space():
    rng = random.Random(0)
    for space in ("uniform", "per_layer"):
        for _ in range(50):
            sample_config(space, MINILM, rng).validate(MINILM)
    assert head_divisors(12) == (1, 2, 3, 4, 6, 12)
    assert smallest_config("uniform", MINILM).num_layers == 0
    assert {s.name for s in parameter_specs("uniform", BERT_BASE)} == {"num_layers", "num_heads", "num_units"}


def test_metric_lines_round_trip_through_the_sagemaker_regexes():
    assert [d["Name"] for d in METRIC_DEFINITIONS] == [
        "epoch",
        "train_loss",
        "num_parameters",
        "validation_error",
        "latency_ms",
        "macs",
    ]
    line = format_metrics(
        epoch=3, train_loss=0.4123456, num_parameters=108311810, validation_error=0.25, latency_ms=12.5,
        macs=1_262_000_128,
    )  # fmt: skip
    assert parse_metrics(line) == {
        "epoch": 3.0,
        "train_loss": pytest.approx(0.412346),
        "num_parameters": 108311810.0,
        "validation_error": 0.25,
        "latency_ms": 12.5,
        "macs": 1_262_000_128.0,
    }
    assert parse_metrics(f"INFO step done; {format_metrics(validation_error=1e-7)}") == {"validation_error": 1e-7}
    assert parse_metrics("num_epochs=5 max_epoch=3") == {}
    with pytest.raises(ValueError):
        format_metrics(accuracy=0.9)


def _parameter_objectives(subnet):
    from pruning.params import EncoderShape, count_parameters

    shape = EncoderShape(30522, 384, 12, 512, 2, 2)
    size = count_parameters(shape, subnet)
    return {"validation_error": 1.0 / (1.0 + size / 1e7), "num_parameters": size}


@pytest.mark.parametrize("searcher", ["random", "morea"])
def test_two_searches_with_the_same_seed_give_the_same_configurations(searcher):
    import numpy as np
    from pruning.search import run_search

    def configurations(seed, global_seed):
        np.random.seed(global_seed)  # syne-tune 0.16's own sampler drew from this global state
        rows = run_search(
            _parameter_objectives, "uniform", MINILM, searcher, 24, ["validation_error", "num_parameters"],
            seed=seed, log=lambda message: None,
        )  # fmt: skip
        return [row["hyperparameters"] for row in rows]

    first = configurations(0, global_seed=1)
    assert configurations(0, global_seed=2) == first
    assert configurations(1, global_seed=1) != first


def test_morea_steps_heads_to_a_neighbouring_value():
    import numpy as np
    from pruning.search import mutate, syne_tune_config_space

    space = syne_tune_config_space("uniform", MINILM)
    assert list(space["num_heads"].categories) == [1, 2, 3, 4, 6, 12]  # ordered: 6 -> 4 or 12
    space = {**space, "num_layers": 3, "num_units": 100}  # only heads can change
    rng = np.random.RandomState(0)
    children = {mutate({"num_layers": 3, "num_heads": 6, "num_units": 100}, space, rng)["num_heads"] for _ in range(40)}
    assert children == {4, 12}
    assert {
        mutate({"num_layers": 3, "num_heads": 12, "num_units": 100}, space, rng)["num_heads"] for _ in range(9)
    } == {6}


def test_typed_model_dimensions_are_checked_against_config_json():
    from pruning.search_space import check_model_dims

    config = {"num_hidden_layers": 6, "num_attention_heads": 12, "intermediate_size": 1536}
    check_model_dims(MINILM, config)
    with pytest.raises(ValueError, match="intermediate_size is 3072, the model's config.json says 1536"):
        check_model_dims(ModelDims(6, 12, 3072), config)


def test_the_scripts_offer_the_search_spaces_the_code_defines():
    """pruning/settings.py and pruning/search_space.py are each loaded alone by the stacks, so each names them."""
    from typing import get_args

    from pruning.search_space import SPACES
    from pruning.settings import SearchSpace

    assert get_args(SearchSpace) == SPACES
