"""What the QLoRA training code accepts, read from the code itself (standard library only).

Config validation, the Training stack and tools/start_training.py all ask this module, which reads the settings'
dataclasses train.py's parser is built from (training_code/qlora/finetune/config.py), so a renamed flag fails the
synth instead of a training job hours later.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import types
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import cache
from types import ModuleType

from ..paths import QLORA_CODE
from .loader import load_code_module

ENTRY_POINT = "train.py"

# Flags SageMaker fills from SM_* variables and channels; a hyperparameter must never point them elsewhere.
RESERVED = frozenset({"train_data", "eval_data", "output_dir", "model_dir", "checkpoint_dir", "model_channel"})
_KINDS = {"int": "an integer", "float": "a number"}
# The workflow records the model folder as the servable model; `merge` false leaves an adapter there.
NO_MERGE_PROBLEM = (
    "the workflow records the job's model folder as the servable model and merge false leaves "
    "only an adapter there: keep merge true (run train.py --no-merge outside the workflow)"
)


@dataclass(frozen=True)
class _Setting:
    """How train.py reads one `--name value`: the converter its parser applies, the values it allows."""

    convert: Callable[[str], object]
    kind: str  # what the refusal says train.py expects
    choices: tuple[str, ...] | None


def _settings_module() -> ModuleType:
    return load_code_module(QLORA_CODE, "finetune/config.py")


def _setting(hint: object) -> _Setting:
    """The converter and choices train.py's parser (transformers' HfArgumentParser over finetune/config.py, booleans
    through its parse_bool) derives from a field's type: Optional[X] reads as X, a Literal as its choices."""
    arguments = [a for a in typing.get_args(hint) if a is not type(None)]
    if isinstance(hint, types.UnionType) or typing.get_origin(hint) is typing.Union:
        (hint,) = arguments
    if typing.get_origin(hint) is typing.Literal:
        return _Setting(str, "another value", tuple(typing.get_args(hint)))
    if hint is bool:
        return _Setting(_settings_module().parse_bool, "a boolean (true/false)", None)
    return _Setting(hint, _KINDS.get(hint.__name__, "another value"), None)


@cache
def _options() -> dict[str, _Setting]:
    """{hyperparameter name: how train.py reads it} for every field of finetune/config.py's TrainConfig (each is a
    `--name` flag of train.py) but the reserved paths."""
    config = _settings_module().TrainConfig
    hints = typing.get_type_hints(config)
    return {f.name: _setting(hints[f.name]) for f in dataclasses.fields(config) if f.name not in RESERVED}


def hyperparameter_names() -> list[str]:
    """Names that may be set in config or per execution."""
    return sorted(_options())


@cache
def hyperparameter_defaults() -> dict[str, str]:
    """{name: train.py's default as a hyperparameter spells it} (booleans `true`/`false`; a setting without a
    default, None, is left out)."""
    config = _settings_module().TrainConfig
    spelled = {
        f.name: str(f.default).lower() if isinstance(f.default, bool) else str(f.default)
        for f in dataclasses.fields(config)
        if f.default is not None
    }
    return {name: value for name, value in spelled.items() if name in _options()}


def hyperparameter_problem(name: str, value: str) -> str | None:
    """Why train.py would reject `--name value`, or None when it accepts it."""
    if name in RESERVED:
        return "is set by SageMaker from the job's channels and paths; it cannot be a hyperparameter"
    setting = _options().get(name)
    if setting is None:
        return "unknown hyperparameter; train.py accepts: " + ", ".join(hyperparameter_names())
    try:
        converted = setting.convert(value)
    except (TypeError, ValueError, argparse.ArgumentTypeError):
        return f"got {value!r}; train.py expects {setting.kind}"
    if setting.choices and converted not in setting.choices:
        return f"got {value!r}; allowed: {', '.join(map(str, setting.choices))}"
    return None


def merge_problem(value: str) -> str | None:
    """Why the workflow refuses this `merge` value (false in any spelling train.py accepts), or None."""
    if hyperparameter_problem("merge", value):
        return None  # the type error is reported there
    return None if parse_bool(value) else f"got {value!r}; {NO_MERGE_PROBLEM}"


def parse_bool(value: str) -> bool:
    """train.py's boolean parsing; a value it rejects counts as false (hyperparameter_problem reports it)."""
    try:
        return bool(_settings_module().parse_bool(value))
    except argparse.ArgumentTypeError:
        return False


def bool_spellings(truth: bool) -> tuple[str, ...]:
    """train.py's true (or false) booleans as lower, Capitalized and UPPER case: what a Choice can compare."""
    module = _settings_module()
    words = module.TRUE_WORDS if truth else module.FALSE_WORDS
    return tuple(sorted({form for word in words for form in (word, word.capitalize(), word.upper())}))


@cache
def metric_definitions() -> tuple[dict[str, str], ...]:
    """SageMaker MetricDefinitions (Name/Regex) from the training code's metrics module."""
    return tuple(dict(d) for d in load_code_module(QLORA_CODE, "finetune/metrics.py").METRIC_DEFINITIONS)


@cache
def model_facts_schema() -> tuple[str, dict[str, str]]:
    """(file name, {fact: "str" | "int" | "bool"}) of the model_facts.json train.py writes beside the model."""
    module = load_code_module(QLORA_CODE, "finetune/facts.py")
    return module.FACTS_FILE, dict(module.FACT_TYPES)


@cache
def hub_token_variable() -> str:
    """The job's environment variable train.py reads the hub token's secret ARN from (finetune/hub_token.py)."""
    return load_code_module(QLORA_CODE, "finetune/hub_token.py").SECRET_VARIABLE


def base_record_environment(record_file: str, facts: Mapping[str, object], hub_id: str | None) -> tuple[str, str]:
    """(variable, value): the facts of a base-model record (`facts`: its fields by name) train.py checks the base
    it resolves against (finetune/base_record.py), as compact JSON with the record's file and, for a base named by
    its hub id, that id (its refusal names them)."""
    module = load_code_module(QLORA_CODE, "finetune/base_record.py")
    named = {module.RECORD_FILE: record_file, **({module.HUB_ID: hub_id} if hub_id is not None else {})}
    checked = {fact: facts[fact] for fact in module.CHECKED_FACTS}
    return module.RECORD_VARIABLE, json.dumps({**named, **checked}, separators=(",", ":"))
