"""CLI flags, SageMaker defaults from SM_* variables, and SageMaker-style boolean values."""

from __future__ import annotations

import subprocess
import sys

import pytest
from finetune.args import SAGEMAKER_CHECKPOINT_DIR, parse_args
from qlora_test_helpers import QLORA_DIR

LOCAL = ["--model_id", "m", "--train_data", "d.jsonl", "--output_dir", "out"]


def test_sagemaker_paths_come_from_the_environment_and_the_model_channel_wins(tmp_path):
    channel = tmp_path / "model"
    channel.mkdir()
    env = {
        "SM_CHANNEL_TRAINING": "/opt/ml/input/data/training",
        "SM_CHANNEL_MODEL": str(channel),
        "SM_MODEL_DIR": "/opt/ml/model",
        "SM_OUTPUT_DATA_DIR": "/opt/ml/output/data",
    }
    args = parse_args(["--model_id", "meta-llama/Llama-2-7b-hf", "--max_steps", "10"], env=env)
    assert args.model_id == str(channel)
    assert args.train_data == "/opt/ml/input/data/training"
    assert args.model_dir == "/opt/ml/model"
    assert args.output_dir == "/opt/ml/output/data"
    assert args.checkpoint_dir == SAGEMAKER_CHECKPOINT_DIR
    assert args.max_steps == 10


def test_local_defaults_put_model_and_checkpoints_under_the_output_dir():
    args = parse_args(LOCAL, env={})
    assert (args.model_dir, args.checkpoint_dir) == ("out/model", "out/checkpoints")
    assert args.model_id == "m"
    # Defaults of the recipe: the seed's LoRA and optimizer settings, double quant + bf16 compute, packing.
    assert (args.lora_r, args.lora_alpha, args.lora_dropout) == (64, 16, 0.1)
    assert (args.learning_rate, args.weight_decay, args.max_grad_norm) == (2e-4, 0.001, 0.3)
    assert args.double_quant and args.compute_dtype == "bfloat16" and args.quant_type == "nf4"
    assert args.packing and args.merge and args.target_modules == "auto"


@pytest.mark.parametrize(
    ("flags", "expected"),
    [
        ([], True),
        (["--merge"], True),
        (["--no-merge"], False),
        (["--merge", "False"], False),
        (["--merge", "true"], True),
        (["--no_merge"], False),
    ],
)
def test_boolean_flags_take_cli_and_sagemaker_forms(flags, expected):
    assert parse_args(LOCAL + flags, env={}).merge is expected


def test_seed_recipe_settings_can_be_selected():
    args = parse_args(
        LOCAL + ["--compute_dtype", "float16", "--double_quant", "false", "--packing", "False", "--group_by_length"],
        env={},
    )
    assert (args.compute_dtype, args.double_quant, args.packing, args.group_by_length) == (
        "float16",
        False,
        False,
        True,
    )


@pytest.mark.parametrize("missing", ["--model_id", "--train_data", "--output_dir"])
def test_missing_required_paths_fail_outside_sagemaker(missing):
    flags = list(LOCAL)
    index = flags.index(missing)
    del flags[index : index + 2]
    with pytest.raises(SystemExit):
        parse_args(flags, env={})


def test_bad_boolean_is_rejected():
    with pytest.raises(SystemExit):
        parse_args(LOCAL + ["--packing", "maybe"], env={})


def test_help_runs_without_loading_torch():
    result = subprocess.run(
        [sys.executable, str(QLORA_DIR / "train.py"), "--help"], capture_output=True, text=True, check=False, timeout=60
    )
    assert result.returncode == 0, result.stderr
    for flag in (
        "--model_id",
        "--train_data",
        "--eval_fraction",
        "--lora_r",
        "--target_modules",
        "--packing",
        "--merge",
        "--compute_dtype",
        "--gradient_accumulation_steps",
    ):
        assert flag in result.stdout


def test_the_stacks_accept_a_hyperparameter_value_exactly_when_train_py_parses_it():
    """stacks/code_contract reads finetune/config.py's dataclasses; train.py's parser is HfArgumentParser over the
    same fields: both must agree on every name and value (spellings SageMaker sends included)."""
    from finetune.args import build_parser

    from stacks.code_contract.qlora import RESERVED, hyperparameter_names, hyperparameter_problem

    parser = build_parser({})
    flags = {a.dest for a in parser._actions if a.option_strings and a.option_strings[0] == f"--{a.dest}"}
    assert set(hyperparameter_names()) == flags - RESERVED - {"help"}
    for name in hyperparameter_names():
        for value in ("True", "false", "on", "maybe", "3", "0.5", "-1", "1e-4", "auto", "drop", "bfloat16", "fp4"):
            try:
                parser.parse_args([f"--{name}", value])
                parsed = True
            except SystemExit:
                parsed = False
            assert (hyperparameter_problem(name, value) is None) is parsed, (name, value)
