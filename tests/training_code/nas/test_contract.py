"""What a SageMaker job hands the scripts: HyperParameters -> command line, channels -> SM_CHANNEL_*, and the
split that trials must take from the super-network's metadata instead of their own defaults."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from nas_test_helpers import NAS_DIR, supernet_folder
from pruning.cli import load_data
from pruning.contract import PARSERS, SUPERNET_RECORDED, check_command_line, sagemaker_argv, tuned_values
from pruning.data import load_splits
from pruning.search_space import sagemaker_parameter_ranges

SPLIT = {"dataset": "jsonl", "split_seed": 7, "validation_fraction": 0.2}


@pytest.fixture()
def supernet(minilm_path, tmp_path):
    metadata = {"search_space": "uniform", "max_length": 64, "validation_error": 0.1, **SPLIT}
    return supernet_folder(minilm_path, tmp_path / "supernet", metadata)


def test_every_entry_script_has_its_parsers_listed():
    scripts = {p.name for p in NAS_DIR.glob("*.py") if "__main__" in p.read_text()}
    assert scripts == set(PARSERS)


def test_the_module_needs_only_the_standard_library():
    blocker = "import sys\nfor n in ('torch', 'transformers', 'numpy', 'syne_tune'):\n    sys.modules[n] = None\n"
    code = f"{blocker}sys.path.insert(0, {str(NAS_DIR)!r})\nimport pruning.contract\n"
    subprocess.run([sys.executable, "-c", code], check=True)


def test_hyperparameters_become_the_toolkit_command_line():
    argv = sagemaker_argv(
        {"search-space": '"uniform"', "max-error-increase": "0.01", "sagemaker_program": "x.py", "flag": "true"}
    )
    assert argv == ["--flag", "True", "--max-error-increase", "0.01", "--search-space", "uniform"]


def test_trial_command_line_reads_the_model_channel(supernet, sample_data_dir):
    ranges = sagemaker_parameter_ranges("uniform", 6, 12, 1536)
    hyperparameters = {"search-space": "uniform", "sagemaker_program": "evaluate_subnetwork.py", **tuned_values(ranges)}
    channels = {"model": str(supernet), "training": str(sample_data_dir)}
    ((args, dims),) = check_command_line("evaluate_subnetwork.py", hyperparameters, channels)
    assert args.subnetwork == {"num_layers": 6, "num_heads": 12, "num_units": 1536}
    assert str(args.model_dir) == str(supernet) and args.data_dir == str(sample_data_dir)


def test_trials_take_the_split_from_the_supernetwork_metadata(supernet, sample_data_dir):
    channels = {"model": str(supernet), "training": str(sample_data_dir)}
    tuned = {"num_layers": "2", "num_heads": "6", "num_units": "100"}
    ((args, _),) = check_command_line("evaluate_subnetwork.py", tuned, channels)
    assert {name: getattr(args, name) for name in SPLIT} == SPLIT
    expected = load_splits("jsonl", sample_data_dir, validation_fraction=0.2, seed=7)["validation"]
    assert load_data(args)["validation"] == expected
    for flag, value in (("split-seed", "42"), ("validation-fraction", "0.3"), ("dataset", "glue_rte")):
        assert flag in SUPERNET_RECORDED
        with pytest.raises(SystemExit, match=f"--{flag} .* differs from the super-network's"):
            check_command_line("evaluate_subnetwork.py", {**tuned, flag: value}, channels)
    (search,) = check_command_line("search_subnetworks.py", {}, channels)
    assert {name: getattr(search, name) for name in SPLIT} == SPLIT


def test_export_job_needs_its_choice_of_sub_network(supernet, sample_data_dir, tmp_path):
    channels = {"model": str(supernet), "pareto": str(tmp_path), "training": str(sample_data_dir)}
    hyperparameters = {"max-error-increase": "0.01", "minimise": "latency_ms", "sagemaker_program": "export_models.py"}
    (_, rest), exported = check_command_line("export_models.py", hyperparameters, channels)
    assert exported.max_error_increase == 0.01 and exported.minimise == "latency_ms"
    assert exported.pareto_file == str(tmp_path / "pareto.json")
    assert exported.data_dir == str(sample_data_dir)  # the training channel: the compressed model is re-measured
    with pytest.raises(SystemExit):  # without max-error-increase the job would exit on argparse
        check_command_line("export_models.py", {"minimise": "latency_ms"}, channels)
    with pytest.raises(ValueError, match="runs export_models.py"):
        check_command_line("select_tuning_job.py", hyperparameters, channels)


def test_select_job_parses_the_stack_flags(supernet):
    hyperparameters = {"tuning-job-name": "tj", "objectives": "validation_error,latency_ms", "search-space": "uniform"}
    (args,) = check_command_line("select_tuning_job.py", hyperparameters, {"model": str(supernet)})
    assert args.model_dir == str(supernet) and args.objectives == "validation_error,latency_ms"
    json.dumps(vars(args))


@pytest.mark.parametrize("objectives", ["validation_error,macs", "validation_error,num_parameters,macs"])
def test_select_and_export_jobs_parse_the_macs_settings(supernet, sample_data_dir, tmp_path, objectives):
    hyperparameters = {"tuning-job-name": "tj", "objectives": objectives, "search-space": "uniform"}
    (args,) = check_command_line("select_tuning_job.py", hyperparameters, {"model": str(supernet)})
    assert args.objectives == objectives
    channels = {"model": str(supernet), "pareto": str(tmp_path), "training": str(sample_data_dir)}
    export = {"max-error-increase": "0.01", "minimise": "macs", "sagemaker_program": "export_models.py"}
    _, exported = check_command_line("export_models.py", export, channels)
    assert exported.minimise == "macs"


@pytest.mark.parametrize("objectives", ["validation_error,flops", "num_parameters,macs", "validation_error"])
def test_the_select_job_refuses_unknown_objectives_before_listing_trials(supernet, objectives):
    with pytest.raises(SystemExit):
        check_command_line(
            "select_tuning_job.py", {"tuning-job-name": "tj", "objectives": objectives}, {"model": str(supernet)}
        )
