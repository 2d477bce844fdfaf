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
from stacks.config.schema import describe, parse, setting
from stacks.config.training import TrainingConfig
from tools.config_reference import sections

ROOT = Path(__file__).resolve().parents[3]
DEV = yaml.safe_load((ROOT / "config" / "dev.yaml").read_text())


def _config(**top) -> AppConfig:
    config = parse(AppConfig, {**DEV, **top}, source="config/dev.yaml")
    object.__setattr__(config, "env_name", "dev")
    return config


def test_stack_ids_and_tags_name_app_and_environment():
    config = _config(app_name="shop", tags={"owner": "ml", "app": "other"})
    assert config.stack_id("Serving") == "shop-dev-Serving"
    assert dict(config.all_tags) == {"app": "other", "environment": "dev", "owner": "ml"}
    assert dict(_config(tags={}).all_tags) == {"app": "llm-inf2", "environment": "dev"}


def test_serving_exists_only_with_a_model_prefix():
    assert _config().serves is False  # dev ships no model yet
    assert _config(serving={**DEV["serving"], "model_prefix": "models/x/"}).serves is True
    assert _config(serving=None).serves is False


def test_the_compile_step_follows_the_backend_unless_set():
    staging = yaml.safe_load((ROOT / "config" / "staging.yaml").read_text())
    vllm = {**staging["serving"], "model_prefix": None}
    assert _config().compiles_for_neuron is False
    assert _config(serving=vllm, training={**DEV["training"], "neuron_compile": {}}).compiles_for_neuron is True
    off = {**DEV["training"], "neuron_compile": {"enabled": False}}
    assert _config(serving=vllm, training=off).compiles_for_neuron is False


def test_warnings_are_lines_of_the_source_file():
    config = _config(serving={**DEV["serving"], "model_parameters_billions": 6.7})
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
    assert stacks.config.AppConfig is AppConfig and stacks.config.ConfigError is ConfigError
    assert sorted(stacks.config.__all__) == stacks.config.__all__
    with pytest.raises(AttributeError, match="module 'stacks.config' has no attribute 'Nothing'"):
        _ = stacks.config.Nothing


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
        value: int | str = setting(1)

    @dataclasses.dataclass(frozen=True)
    class Raw:
        value: bytes = setting(b"")

    with pytest.raises(TypeError, match=r"unsupported union int \| str at value"):
        parse(Union, {"value": 1}, source="s")
    with pytest.raises(TypeError, match="unsupported config type <class 'bytes'> at value"):
        parse(Raw, {"value": b"x"}, source="s")
