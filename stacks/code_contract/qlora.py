"""What the QLoRA training code accepts, read from the code itself (standard library only).

Config validation, the Training stack and tools/start_training.py all ask this module, so a renamed flag in
training_code/qlora/finetune/args.py fails the synth instead of a training job hours later.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Mapping
from functools import cache

from ..paths import QLORA_CODE
from .loader import load_code_module

ENTRY_POINT = "train.py"

# Flags SageMaker fills from SM_* variables and channels; a hyperparameter must never point them elsewhere.
RESERVED = frozenset({"train_data", "eval_data", "output_dir", "model_dir", "checkpoint_dir", "model_channel"})
_KINDS = {"int": "an integer", "float": "a number", "parse_bool": "a boolean (true/false)"}
# The workflow records the model folder as the servable model; `merge` false leaves an adapter there.
NO_MERGE_PROBLEM = (
    "the workflow records the job's model folder as the servable model and merge false leaves "
    "only an adapter there: keep merge true (run train.py --no-merge outside the workflow)"
)


@cache
def _options() -> dict[str, argparse.Action]:
    """{hyperparameter name: argparse action} for every `--name` flag of train.py but the reserved paths and
    `--help` (a hyperparameter `help` would make the job print its usage and exit 0 without training)."""
    parser = load_code_module(QLORA_CODE, "finetune/args.py").build_parser({})
    options = {}
    for action in parser._actions:  # noqa: SLF001 - argparse has no public listing of its actions
        if isinstance(action, argparse._HelpAction):  # noqa: SLF001 - the only way to recognise --help
            continue
        for flag in action.option_strings:
            name = flag[2:]
            if flag.startswith("--") and name == action.dest and name not in RESERVED:
                options[name] = action
    return options


def hyperparameter_names() -> list[str]:
    """Names that may be set in config or per execution."""
    return sorted(_options())


def hyperparameter_problem(name: str, value: str) -> str | None:
    """Why train.py would reject `--name value`, or None when it accepts it."""
    if name in RESERVED:
        return "is set by SageMaker from the job's channels and paths; it cannot be a hyperparameter"
    action = _options().get(name)
    if action is None:
        return "unknown hyperparameter; train.py accepts: " + ", ".join(hyperparameter_names())
    try:
        converted = action.type(value) if action.type else value
    except (TypeError, ValueError, argparse.ArgumentTypeError):
        kind = _KINDS.get(getattr(action.type, "__name__", ""), "another value")
        return f"got {value!r}; train.py expects {kind}"
    if action.choices and converted not in action.choices:
        return f"got {value!r}; allowed: {', '.join(map(str, action.choices))}"
    return None


def merge_problem(value: str) -> str | None:
    """Why the workflow refuses this `merge` value (false in any spelling train.py accepts), or None."""
    if hyperparameter_problem("merge", value):
        return None  # the type error is reported there
    return None if parse_bool(value) else f"got {value!r}; {NO_MERGE_PROBLEM}"


def parse_bool(value: str) -> bool:
    """train.py's boolean parsing; a value it rejects counts as false (hyperparameter_problem reports it)."""
    try:
        return bool(load_code_module(QLORA_CODE, "finetune/args.py").parse_bool(value))
    except argparse.ArgumentTypeError:
        return False


def bool_spellings(truth: bool) -> tuple[str, ...]:
    """train.py's true (or false) booleans as lower, Capitalized and UPPER case: what a Choice can compare."""
    module = load_code_module(QLORA_CODE, "finetune/args.py")
    words = module._TRUE if truth else module._FALSE  # noqa: SLF001 - the parser's own tables
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
