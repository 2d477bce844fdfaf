"""What the stacks read off a parsed config besides its settings: names, tags, derived job shapes, and the package's
own surface (lazy names, frozen sections, one-line errors). Parsed in-process from dicts, no app run."""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path

import pytest
import yaml

import stacks.config
from stacks.config import ConfigError, aws_limits
from stacks.config.app_config import AppConfig
from stacks.config.errors import one_line
from stacks.config.loader import parse_environment
from stacks.config.schema import describe, parse, setting
from stacks.config.training import TrainingConfig
from tools.config_reference import sections

ROOT = Path(__file__).resolve().parents[3]
DEV = yaml.safe_load((ROOT / "config" / "dev.yaml").read_text())


def _config(**top) -> AppConfig:
    config = parse_environment({**DEV, **top}, "config/dev.yaml", ROOT / "config")
    object.__setattr__(config, "env_name", "dev")
    return config


def _served_at(config: AppConfig, model_prefix: str, graph: str) -> AppConfig:
    """`config` serving these prefixes as a promotion's lock sets them (typed into the YAML they are refused)."""
    from tests.synth import replaced

    serving = dataclasses.replace(config.serving, model_prefix=model_prefix, compiled_graph_prefix=graph)
    return replaced(config, serving=serving)


def test_stack_ids_and_tags_name_app_and_environment():
    config = _config(app_name="shop", tags={"owner": "ml", "app": "other"})
    assert config.stack_id("Serving") == "shop-dev-Serving"
    assert dict(config.all_tags) == {"app": "other", "environment": "dev", "owner": "ml"}
    assert dict(_config(tags={}).all_tags) == {"app": "llm-inf2", "environment": "dev"}


def test_serving_exists_only_with_a_promoted_model_lock():
    from tests.synth import lock_document, with_lock

    assert _config().serves is False  # dev ships no model yet
    assert with_lock(_config(), lock_document("dev")).serves is True
    assert _config(serving=None).serves is False


def test_the_compile_step_follows_the_backend_unless_set():
    staging = yaml.safe_load((ROOT / "config" / "staging.yaml").read_text())
    vllm = dict(staging["serving"])
    assert _config().compiles_for_neuron is True  # lmi_neuronx serves its partition's output
    assert _config(serving=vllm, training={**DEV["training"], "neuron_compile": {}}).compiles_for_neuron is True
    off = {**DEV["training"], "neuron_compile": {"enabled": False}}
    assert _config(training=off).compiles_for_neuron is False
    assert _config(serving=vllm, training=off).compiles_for_neuron is False
    on = {**DEV["training"], "neuron_compile": {"enabled": True}}
    assert _config(serving=vllm, training=on).compiles_for_neuron is True
    with pytest.raises(ConfigError) as caught:
        _config(training=on, serving=None)
    assert str(caught.value) == (
        "config/dev.yaml: training.neuron_compile.enabled: got true with serving.backend None; the compile step "
        "compiles for a serving profile that serves a compiled model (vllm_neuronx, lmi_neuronx): set a serving "
        "section or enabled: null"
    )


def test_warnings_are_lines_of_the_source_file():
    startup_compile = {**_training(model_id="NousResearch/Llama-2-7b-chat-hf"), "neuron_compile": {"enabled": False}}
    config = _config(training=startup_compile)
    object.__setattr__(config, "source", "config/dev.yaml")
    assert [line.split(": ", 2)[:2] for line in config.warnings()] == [
        ["config/dev.yaml", "serving.backend"],
        ["config/dev.yaml", "serving.compiled_graph_prefix"],
    ]
    assert _config(serving=None).warnings() == []


@pytest.mark.parametrize(
    ("instance_type", "count", "gpus"),
    # GPUs per instance as AWS documents the types (EC2 accelerated computing: g5.12xlarge 4 A10G, p4d 8 A100)
    [("ml.g5.2xlarge", 1, 1), ("ml.g5.2xlarge", 3, 3), ("ml.g5.12xlarge", 2, 8), ("ml.p4d.24xlarge", 1, 8)],
)
def test_world_size_is_instances_times_gpus(instance_type, count, gpus):
    training = parse(TrainingConfig, {"instance_type": instance_type, "instance_count": count}, source="s")
    assert training.world_size == gpus and training.distributed is (gpus > 1)


def test_spot_waits_twice_the_run_time_up_to_28_days_unless_set():
    def wait(**data):
        return parse(TrainingConfig, data, source="s").max_wait_seconds

    assert wait() is None and wait(max_runtime_hours=5) is None
    assert wait(spot=True, max_runtime_hours=5) == 10 * 3600
    assert wait(spot=True, max_runtime_hours=400) == 28 * 24 * 3600  # MaxRuntimeInSeconds' documented maximum
    assert wait(spot=True, max_runtime_hours=5, max_wait_hours=7) == 7 * 3600


def test_an_own_image_is_either_setting():
    assert not parse(TrainingConfig, {}, source="s").has_own_image
    assert parse(TrainingConfig, {"image_repository": "r:1"}, source="s").has_own_image
    assert parse(
        TrainingConfig, {"image_uri": "123456789012.dkr.ecr.us-east-1.amazonaws.com/r:1"}, source="s"
    ).has_own_image


@pytest.mark.parametrize("cls", sorted(sections(), key=lambda c: c.__name__), ids=lambda c: c.__name__)
def test_every_section_is_frozen(cls):
    """Stacks share one config: no section can be changed after validation."""
    assert cls.__dataclass_params__.frozen


def test_the_package_names_load_on_first_use():
    import importlib

    homes = {"AppConfig": "app_config", "ConfigError": "errors", "DataConfig": "data", "PruningConfig": "pruning"}
    homes |= {"DeployConfig": "deploy"}
    homes |= {"ServingConfig": "serving", "TrainingConfig": "training", "load_config": "loader"}
    assert stacks.config.__all__ == sorted(homes)
    for name, module in homes.items():
        assert getattr(stacks.config, name) is getattr(importlib.import_module(f"stacks.config.{module}"), name)
    with pytest.raises(AttributeError) as caught:
        _ = stacks.config.Nothing
    assert str(caught.value) == "module 'stacks.config' has no attribute 'Nothing'"


def test_name_and_source_are_the_loaders_not_the_files():
    config = parse(AppConfig, {}, source="s")
    assert (config.env_name, config.source) == ("", "")
    with pytest.raises(ConfigError, match="env_name: unknown setting"):
        parse(AppConfig, {"env_name": "prod"}, source="s")


def test_errors_are_one_line_whatever_the_key_holds():
    assert one_line("a\nb\tc\x00") == "a\\nb\\tc\\x00"
    error = ConfigError("config/dev.yaml", "tags.a\nb", "got 'x'")
    assert str(error) == "config/dev.yaml: tags.a\\nb: got 'x'"
    assert (error.source, error.field, error.problem) == ("config/dev.yaml", "tags.a\nb", "got 'x'")


def test_long_values_are_cut_to_sixty_characters():
    assert describe("a" * 58) == repr("a" * 58)
    assert describe("a" * 59) == repr("a" * 57)[:57] + "..."
    assert len(describe(list(range(100)))) == 60


@dataclasses.dataclass(frozen=True)
class _Limits:
    required: str = setting(pattern="x+", hint="some x")
    at_least: int = setting(5, ge=2)
    at_most: float = setting(1.5, le=3)
    free: int = setting(0)
    names: list[str] = setting([], pattern="[a-z]+")


@pytest.mark.parametrize(
    ("data", "line"),
    [
        ({"at_least": 1}, "s: p.at_least: got 1; expected an integer >= 2"),
        ({"at_most": 3.5}, "s: p.at_most: got 3.5; expected a number <= 3"),
        ({"at_most": "3"}, "s: p.at_most: got '3'; expected a number <= 3"),
        ({"free": 1.5}, "s: p.free: got 1.5; expected an integer"),
        ({"names": "a"}, "s: p.names: got 'a'; expected a list"),
        ({"names": ["a", "B"]}, "s: p.names[1]: got 'B'; must match [a-z]+"),
        ({}, "s: p.required: missing; this setting is required"),
        ({"required": "y"}, "s: p.required: got 'y'; must match x+ (some x)"),
        ({"required": 1}, "s: p.required: got 1; expected a string (some x)"),
        ({"zzz": 1}, "s: p.zzz: unknown setting; allowed: at_least, at_most, free, names, required"),
        ({"at_leest": 1}, "s: p.at_leest: unknown setting; did you mean 'at_least'? allowed: "),
    ],
)
def test_the_schema_refuses_with_one_line(data, line):
    with pytest.raises(ConfigError) as caught:
        parse(_Limits, data if "required" in data or not data else {"required": "x", **data}, source="s", path="p")
    assert str(caught.value).startswith(line), str(caught.value)
    if "allowed: " not in line:  # the rest of the line is the hint (in the line) or nothing
        assert str(caught.value) == line, str(caught.value)


def test_the_schema_converts_what_it_accepts():
    parsed = parse(_Limits, {"at_least": 2, "at_most": 3, "free": -7, "names": ["a"], "required": "x"}, source="s")
    assert (parsed.at_least, parsed.at_most, parsed.free, parsed.names, parsed.required) == (2, 3.0, -7, ("a",), "x")
    assert isinstance(parsed.at_most, float) and not math.isnan(parsed.at_most)
    assert _Limits(required="x").names == [] and _Limits(required="x").names is not _Limits(required="x").names


@dataclasses.dataclass(frozen=True)
class _Sent:
    # looser than the field: SageMaker's 1..512 GB wins; stricter: its own 10 wins
    volume: int = setting(8, ge=0, le=10**6, aws=aws_limits.VARIANT_VOLUME_SIZE)
    count: int = setting(1, le=10, aws=aws_limits.VARIANT_INSTANCE_COUNT)
    labels: dict[str, str] = setting({}, key_pattern="[a-z]+")


@pytest.mark.parametrize(
    ("data", "line"),
    [
        ({"volume": 0}, "s: volume: got 0; expected an integer in 1..512 (SageMaker CreateEndpointConfig "),
        ({"volume": 513}, "s: volume: got 513; expected an integer in 1..512 (SageMaker CreateEndpointConfig "),
        ({"count": 11}, "s: count: got 11; expected an integer in 1..10 (SageMaker CreateEndpointConfig "),
        ({"labels": {1: "a"}}, "s: labels: key 1 must be a string"),
        ({"labels": {"A": "a"}}, "s: labels: key 'A' must match [a-z]+"),
        ({"labels": ["a"]}, "s: labels: got ['a']; expected a mapping"),
    ],
)
def test_an_aws_field_narrows_a_looser_range_and_keeps_a_stricter_one(data, line):
    with pytest.raises(ConfigError) as caught:
        parse(_Sent, data, source="s")
    assert str(caught.value).startswith(line), str(caught.value)
    assert parse(_Sent, {"volume": 512, "count": 10}, source="s").volume == 512


def test_types_the_schema_cannot_check_fail_loudly():
    @dataclasses.dataclass(frozen=True)
    class Union:
        value: int | list[int] = setting(1)

    @dataclasses.dataclass(frozen=True)
    class Raw:
        value: bytes = setting(b"")

    with pytest.raises(TypeError) as union:
        parse(Union, {"value": 1}, source="s")
    with pytest.raises(TypeError) as raw:
        parse(Raw, {"value": b"x"}, source="s")
    assert (str(union.value), str(raw.value)) == (
        "unsupported union int | list[int] at value",
        "unsupported config type <class 'bytes'> at value",
    )


def test_a_union_of_scalars_takes_a_value_of_exactly_one_of_them():
    """YAML's true is no integer and 1 no string here: each value keeps the type it was written with."""

    @dataclasses.dataclass(frozen=True)
    class Options:
        extra: dict[str, str | bool | int] = setting({})

    parsed = parse(Options, {"extra": {"a": "x", "b": True, "c": 3}}, source="s").extra
    assert [(k, type(v)) for k, v in parsed.items()] == [("a", str), ("b", bool), ("c", int)]
    for value in (1.5, None, [1], {"k": 1}):
        with pytest.raises(ConfigError) as caught:
            parse(Options, {"extra": {"a": value}}, source="s")
        assert str(caught.value) == (
            f"s: extra.a: got {value!r}; expected a string, a boolean (true/false) or an integer"
        )


def test_inf2_types_are_the_documented_shapes():
    """Inferentia2 chips (2 NeuronCores each), vCPUs and host memory (GiB) per size, as the Neuron documentation
    lists them (awsdocs-neuron.readthedocs-hosted.com, general/arch/neuron-hardware/inf2-arch)."""
    from stacks.config.inf2 import INF2_TYPES

    documented = {"ml.inf2.xlarge": (1, 4, 16), "ml.inf2.8xlarge": (1, 32, 128)}
    documented |= {"ml.inf2.24xlarge": (6, 96, 384), "ml.inf2.48xlarge": (12, 192, 768)}
    assert {name: (t.neuron_cores, t.vcpus, t.host_memory_gb) for name, t in INF2_TYPES.items()} == {
        name: (2 * chips, vcpus, memory) for name, (chips, vcpus, memory) in documented.items()
    }


def test_isolated_mode_creates_what_the_config_does_not_name():
    from stacks.config.network import NetworkConfig

    def network(**data):
        return parse(NetworkConfig, data, source="s", path="network")

    assert (network().creates_vpc, network().creates_security_group) == (False, False)
    assert (network(isolated=True).creates_vpc, network(isolated=True).creates_security_group) == (True, True)
    subnets = ["subnet-0123456789abcdef0", "subnet-0123456789abcdef1"]
    given = network(isolated=True, vpc_id="vpc-0123456789abcdef0", subnet_ids=subnets)
    assert (given.creates_vpc, given.creates_security_group) == (False, True)
    grouped = network(
        isolated=True, vpc_id="vpc-0123456789abcdef0", subnet_ids=subnets, security_group_ids=["sg-01234567"]
    )
    assert grouped.creates_security_group is False


@pytest.mark.parametrize(
    ("data", "line"),
    [
        (
            {"isolated": True, "security_group_ids": ["sg-01234567"]},
            "s: network.security_group_ids: needs vpc_id (the VPC they belong to)",
        ),
        (
            {"isolated": True, "vpc_id": "vpc-01234567", "subnet_ids": ["subnet-01234567"] * 2},
            "s: network.subnet_ids: lists a subnet twice",
        ),
        ({"security_group_ids": ["sg-01234567"]}, "s: network.security_group_ids: only used with isolated: true"),
    ],
)
def test_isolated_mode_refuses_a_half_named_vpc(data, line):
    from stacks.config.network import NetworkConfig

    with pytest.raises(ConfigError) as caught:
        parse(NetworkConfig, data, source="s", path="network")
    assert str(caught.value).startswith(line), str(caught.value)


def test_the_loader_lists_the_environments_it_knows(tmp_path):
    from stacks.config import load_config

    with pytest.raises(ConfigError, match=r"known environments: none$"):
        load_config("dev", tmp_path)
    for env in ("prod", "dev"):
        (tmp_path / f"{env}.yaml").write_text("app_name: shop\n")
    with pytest.raises(ConfigError, match=r"qa.yaml: env: no such file for env 'qa'; known environments: dev, prod$"):
        load_config("qa", tmp_path)
    (tmp_path / "open.yaml").write_text("app_name: [unclosed\n")
    with pytest.raises(ConfigError) as caught:
        load_config("open", tmp_path)
    assert str(caught.value).endswith("open.yaml: line 2: invalid YAML: expected ',' or ']', but got '<stream end>'")
    (tmp_path / "bad.yaml").write_bytes(b"app_name: a\x00\n")
    with pytest.raises(ConfigError, match=r"bad.yaml: <yaml>: invalid YAML: unacceptable character #x0000"):
        load_config("bad", tmp_path)


def test_the_loader_reads_config_of_the_working_folder(monkeypatch):
    from stacks.config import load_config

    monkeypatch.chdir(ROOT)
    config = load_config("dev")
    assert (config.source, config.env_name) == ("config/dev.yaml", "dev")


def test_isolated_mode_lists_every_setting_that_needs_the_internet():
    """A graph outside the model prefix is the lock's check now (test_served_model.py), not listed here."""
    from stacks.config.app_config import OFFLINE_IMAGE, isolation_problems

    subnet, group = "subnet-0123456789abcdef0", "sg-0123456789abcdef0"
    training = {**DEV["training"], "subnet_ids": [subnet], "security_group_ids": [group]}
    config = _served_at(_config(training=training), "models/x/", "graphs/x/")
    isolated = "network.isolated: true"
    assert isolation_problems(config) == [
        (
            "training.base_model_key",
            f"missing; {isolated} needs the base model as an S3 `model` channel (e.g. base-models/llama-2-7b-chat-hf/) "
            "instead of a hub download",
        ),
        (
            "training.hyperparameters.model_id",
            "got 'TinyLlama/TinyLlama-1.1B-Chat-v1.0'; a Hugging Face hub id needs the internet "
            "(network.isolated: true): remove it, training.base_model_key supplies the model",
        ),
        ("training.image_uri", f"missing; {isolated}: {OFFLINE_IMAGE}"),
        ("training.subnet_ids", f"set the VPC under network: ({isolated} uses it for training and serving)"),
        ("training.security_group_ids", f"set the VPC under network: ({isolated} uses it for training and serving)"),
        (
            "pruning.enabled",
            f"got true; the Pruning stack downloads models from the Hugging Face hub, which {isolated} cannot reach",
        ),
    ]


def test_isolated_mode_takes_a_local_model_path_and_a_graph_under_the_model():
    from stacks.config.app_config import isolation_problems

    hyperparameters = {**DEV["training"]["hyperparameters"], "model_id": "/opt/ml/input/data/model"}
    training = {
        **DEV["training"],
        "hyperparameters": hyperparameters,
        "base_model_key": "base-models/tinyllama-1.1b-chat-v1.0/",
        "image_repository": "llm-inf2-training:qlora-1",
    }
    config = _served_at(_config(training=training, pruning={"enabled": False}), "models/x/", "models/x/neuron/")
    assert isolation_problems(config) == []
    assert isolation_problems(_config(training=training, serving=None, pruning={"enabled": False})) == []


def test_alarms_need_no_more_datapoints_than_periods():
    from stacks.config.endpoint import AlarmConfig

    assert parse(AlarmConfig, {"evaluation_periods": 3, "datapoints_to_alarm": 3}, source="s").datapoints_to_alarm == 3
    with pytest.raises(ConfigError) as caught:
        parse(AlarmConfig, {"evaluation_periods": 3, "datapoints_to_alarm": 4}, source="s", path="serving.alarms")
    assert str(caught.value) == "s: serving.alarms.datapoints_to_alarm: got 4; must be <= evaluation_periods (3)"


def test_a_rolling_update_may_last_exactly_start_up_plus_baking():
    rollout = {"maximum_execution_timeout_seconds": 1920, "wait_interval_seconds": 120}
    serving = {**DEV["serving"], "container_startup_health_check_timeout_seconds": 1800, "rollout": rollout}
    assert _config(serving=serving).serving.rollout.maximum_execution_timeout_seconds == 1920


def test_an_unknown_instance_type_gets_its_three_closest():
    from stacks.config.instance_types import TRAINING, check_instance_type

    with pytest.raises(ConfigError) as caught:
        check_instance_type("ml.g5.3xlarge", TRAINING, "s", "training.instance_type")
    assert str(caught.value) == (
        "s: training.instance_type: got 'ml.g5.3xlarge'; not a SageMaker TrainingInstanceType (botocore's model): "
        "closest: ml.g5.xlarge, ml.g5.8xlarge, ml.g5.4xlarge"
    )


# NVIDIA GPUs per instance as EC2's accelerated computing types document them, of the types SageMaker trains on
# (botocore's TrainingInstanceType: no ml.g4dn.metal); every other type counts one.
DOCUMENTED_GPUS = dict.fromkeys(
    ("g4dn.12xlarge", "g5.12xlarge", "g5.24xlarge", "g6.12xlarge", "g6.24xlarge", "g6e.12xlarge", "g6e.24xlarge"), 4
)
DOCUMENTED_GPUS |= {"p3.8xlarge": 4}
DOCUMENTED_GPUS |= dict.fromkeys(("g5.48xlarge", "g6.48xlarge", "g6e.48xlarge", "p3.16xlarge"), 8)
DOCUMENTED_GPUS |= dict.fromkeys(("p3dn.24xlarge", "p4d.24xlarge", "p4de.24xlarge", "p5.48xlarge"), 8)
DOCUMENTED_GPUS |= dict.fromkeys(("p5e.48xlarge", "p5en.48xlarge"), 8)


def test_multi_gpu_types_are_the_documented_ones_sagemaker_trains_on():
    from stacks.config.instance_types import TRAINING, valid_types
    from stacks.config.training import MULTI_GPU_TYPES

    assert dict(MULTI_GPU_TYPES) == {f"ml.{name}": gpus for name, gpus in DOCUMENTED_GPUS.items()}
    assert set(MULTI_GPU_TYPES) <= set(valid_types(TRAINING))


def test_an_isolated_job_without_an_own_image_is_told_how_to_get_one():
    with pytest.raises(ConfigError) as caught:
        parse(
            TrainingConfig,
            {"network_isolation": True, "base_model_key": "base-models/llama/"},
            source="s",
            path="training",
        )
    assert str(caught.value) == (
        "s: training.image_uri: missing; network_isolation: true: script mode pip-installs "
        "training_code/qlora/requirements.txt, which needs the internet: push an image with them baked in (README, "
        "Training) and set training.image_repository (<repo>:<tag> in this account's ECR) or training.image_uri"
    )


@pytest.mark.parametrize(
    ("data", "line"),
    [
        ({"instance_type": "ml.g5.3xlarge"}, "s: instance_type: got 'ml.g5.3xlarge'; not a SageMaker"),
        ({"log_retention_days": 2}, "s: log_retention_days: got 2; allowed: 1, 3"),
        (
            {"image_repository": "r:1", "image_uri": f"{'1' * 12}.dkr.ecr.us-east-1.amazonaws.com/r:1"},
            "s: image_repository:",
        ),
    ],
)
def test_a_training_section_parsed_alone_names_bare_fields(data, line):
    with pytest.raises(ConfigError) as caught:
        parse(TrainingConfig, data, source="s")
    assert str(caught.value).startswith(line), str(caught.value)


@pytest.mark.parametrize(
    ("data", "line"),
    [
        (
            {"security_group_ids": ["sg-0123456789abcdef0"]},
            "s: training.subnet_ids: empty; a VPC config needs both subnet_ids and security_group_ids",
        ),
        (
            {"hyperparameters": {"epochs": "1"}},
            "s: training.hyperparameters.model_id: missing; set a Hugging Face model id or base_model_key",
        ),
    ],
)
def test_a_training_job_needs_a_whole_vpc_and_a_model(data, line):
    with pytest.raises(ConfigError) as caught:
        parse(TrainingConfig, data, source="s", path="training")
    assert str(caught.value) == line
    with_model = parse(
        TrainingConfig, {"hyperparameters": {"epochs": "1"}, "base_model_key": "base-models/x/"}, source="s"
    )
    assert "model_id" not in with_model.hyperparameters


def _training(**hyperparameters) -> dict:
    return {**DEV["training"], "hyperparameters": {**DEV["training"]["hyperparameters"], **hyperparameters}}


def test_an_unrecorded_training_base_fails_naming_the_command_that_records_it():
    """Hub models are named by their hub id; a model only on the bucket by its key folder."""
    with pytest.raises(ConfigError) as refused:
        _config(training=_training(model_id="acme/unknown-7b"))
    assert str(refused.value) == (
        "config/dev.yaml: training.hyperparameters.model_id: got 'acme/unknown-7b'; no record in config/models/ says "
        "what it is, so nothing can check that serving can serve it: run `make base-model MODEL=acme/unknown-7b` and "
        "commit the record it writes"
    )
    offline = {**_training(model_id="/opt/ml/input/data/model"), "base_model_key": "base-models/unknown-7b/"}
    with pytest.raises(ConfigError) as refused:
        _config(training=offline)
    assert str(refused.value).endswith(
        "training.base_model_key: got 'base-models/unknown-7b/'; no record in config/models/ says what it is, so "
        "nothing can check that serving can serve it: run "
        "`make base-model MODEL=s3://<bucket>/base-models/unknown-7b/` and commit the record it writes"
    )


def test_a_size_typed_into_the_serving_section_is_refused_naming_the_record():
    """The record is the one place a base model's size lives: a profile cannot drift from the model it serves."""
    with pytest.raises(ConfigError) as refused:
        _config(serving={**DEV["serving"], "model_parameters_billions": 6.7})
    assert str(refused.value) == (
        "config/dev.yaml: serving.model_parameters_billions: remove this line; the base model's size is read from its "
        "record (config/models/tinyllama-1.1b-chat-v1.0.yaml), never typed here"
    )


def test_fsdp_on_one_gpu_fails_with_its_fix_and_unset_is_off():
    with pytest.raises(ConfigError) as refused:
        _config(training=_training(fsdp="true"))
    assert str(refused.value) == (
        "config/dev.yaml: training.hyperparameters.fsdp: got 'true'; FSDP shards the model over several GPUs and "
        "ml.g5.2xlarge x 1 (1 GPU) has one: set it false or use a multi-GPU instance_type / instance_count > 1"
    )
    unset = {k: v for k, v in DEV["training"]["hyperparameters"].items() if k != "fsdp"}
    assert "fsdp" not in _config(training={**DEV["training"], "hyperparameters": unset}).training.hyperparameters


def test_a_method_other_than_qlora_on_several_gpus_fails_with_its_fix():
    with pytest.raises(ConfigError) as refused:
        _config(training={**_training(method="lora"), "instance_count": 2})
    assert str(refused.value).endswith(
        ", which train.py supports for method qlora only: use qlora, or one single-GPU instance"
    ), str(refused.value)


def test_processing_types_are_botocores_processing_instance_types():
    from stacks.config.instance_types import PROCESSING, valid_types

    assert "ml.m5.xlarge" in valid_types(PROCESSING)


def test_a_dotted_property_becomes_one_environment_variable_name():
    """POSIX environment names are upper-case letters, digits and underscores: every dot becomes an underscore."""
    from stacks.config.serving_properties import as_environment

    assert as_environment("option.neuron.optimize.level=2\n") == {"OPTION_NEURON_OPTIMIZE_LEVEL": "2"}


def test_the_trn1_32xlarge_types_have_32_neuroncores_and_512_gb():
    """trn1-arch.rst: 16 Trainium chips of two NeuronCore-v2 each, 512 GB host memory, trn1n the same."""
    from stacks.config.trn1 import TRN1_TYPES

    assert TRN1_TYPES["ml.trn1.32xlarge"] == (32, 512)
    assert TRN1_TYPES["ml.trn1n.32xlarge"] == (32, 512)


def test_how_each_shipped_environment_gets_its_neuron_graph():
    from stacks.config import load_config
    from stacks.config.rehearsal import compile_path

    paths = {env: compile_path(load_config(env, ROOT / "config")) for env in ("local", "staging")}
    assert paths == {
        "local": "at container start-up by lmi_neuronx (or a precompiled graph the lock names)",
        "staging": "ahead of time by the Training workflow's compile step (optimum-cli export neuron)",
    }


def test_a_rehearsal_entry_needs_a_reason_of_ten_characters_and_cannot_change():
    from stacks.config.rehearsal import NotCovered

    with pytest.raises(ConfigError) as missing:
        parse(NotCovered, {"aspect": "backend"}, source="config/staging.yaml")
    assert str(missing.value) == "config/staging.yaml: reason: missing; this setting is required"
    with pytest.raises(ConfigError) as short:
        parse(NotCovered, {"aspect": "backend", "reason": "short"}, source="config/staging.yaml")
    assert str(short.value) == (
        r"config/staging.yaml: reason: got 'short'; must match \S.{9,499} "
        "(why the difference is accepted (10..500 characters))"
    )
    entry = parse(NotCovered, {"aspect": "backend", "reason": "staging serves the newer backend"}, source="s")
    with pytest.raises(dataclasses.FrozenInstanceError):
        entry.reason = "x"


def _profile_refusal(env: str, model_id: str | None, serving: dict) -> str:
    from stacks.config.trained_model import check_trained_model

    data = yaml.safe_load((ROOT / "config" / f"{env}.yaml").read_text())
    data["training"]["neuron_compile"] = {**data["training"]["neuron_compile"], "enabled": False}
    if model_id is not None:
        data["training"]["hyperparameters"]["model_id"] = model_id
    data["serving"] = {**data["serving"], **serving}
    with pytest.raises(ConfigError) as refused:
        check_trained_model(parse_environment(data, f"config/{env}.yaml", ROOT / "config"))
    return str(refused.value)


def test_a_tp_degree_that_does_not_divide_the_bases_heads_names_the_training_base():
    """Llama-2-7B has 32 attention heads (its config.json): TP 24 does not divide them."""
    line = _profile_refusal(
        "dev",
        "NousResearch/Llama-2-7b-chat-hf",
        {
            "instance_type": "ml.inf2.48xlarge",
            "lmi": {**DEV["serving"]["lmi"], "tensor_parallel_degree": 24},
        },
    )
    assert line.startswith("config/dev.yaml: training.hyperparameters.model_id: the training base "), line
    assert "32 attention heads;" in line


def test_a_tp_degree_that_cannot_shard_the_bases_kv_heads_names_the_training_base():
    """Qwen2.5-7B has 28 attention heads and 4 key/value heads (its config.json): TP 14 divides one, not the other."""
    staging = yaml.safe_load((ROOT / "config" / "staging.yaml").read_text())
    line = _profile_refusal(
        "staging",
        None,
        {"instance_type": "ml.inf2.48xlarge", "neuron": {**staging["serving"]["neuron"], "tensor_parallel_size": 14}},
    )
    assert line.startswith("config/staging.yaml: training.hyperparameters.model_id: the training base Qwen/"), line
    assert "4 key/value heads;" in line
