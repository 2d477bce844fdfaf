"""Command-line arguments, parsed from finetune.config's dataclasses, with SageMaker defaults from SM_* variables.

SageMaker script mode passes every hyperparameter as `--name value` and its paths through SM_* variables,
so in a training job nothing but hyperparameters is needed and locally you pass paths. The result is one frozen
finetune.config.TrainConfig.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
from collections.abc import Mapping, Sequence

from transformers import HfArgumentParser

from .config import SETTING_GROUPS, TrainConfig, parse_bool

SAGEMAKER_CHECKPOINT_DIR = "/opt/ml/checkpoints"
DESCRIPTION = "QLoRA fine-tuning (4-bit NF4 base + LoRA adapter), adapter merge and a training report."


def add_bool_flag(parser: argparse._ActionsContainer, name: str, default: bool, help_text: str) -> None:
    """`--name`, `--name true|false` (SageMaker style) and `--no-name` all set the same destination."""
    dest = name.replace("-", "_")
    parser.add_argument(
        f"--{name}",
        dest=dest,
        nargs="?",
        const=True,
        default=default,
        type=parse_bool,
        help=f"{help_text}; --no-{name} or --{name} false turns it off",
    )
    parser.add_argument(f"--no-{name}", dest=dest, action="store_false", help=argparse.SUPPRESS)
    parser.add_argument(f"--no_{name}", dest=dest, action="store_false", help=argparse.SUPPRESS)


class _OwnFlag:
    """Passes HfArgumentParser's add_argument call on with the field's own `--name` only: HfArgumentParser also
    adds a dashed twin of an underscored name, a flag train.py's command line never had."""

    def __init__(self, container: argparse._ActionsContainer, flag: str) -> None:
        self._container = container
        self._flag = flag

    def add_argument(self, *flags: str, **kwargs) -> argparse.Action:
        return self._container.add_argument(self._flag, **kwargs)


class SageMakerArgumentParser(HfArgumentParser):
    """HfArgumentParser for the command line SageMaker's training toolkit builds: one `--name` per field, and a
    boolean as `--name`, `--name <value>` in any spelling config.parse_bool knows ('True', 'false', ...), or
    `--no-name` (HfArgumentParser's own booleans know fewer spellings and have no `--no-name` when off)."""

    @staticmethod
    def _parse_dataclass_field(parser: argparse._ActionsContainer, field: dataclasses.Field) -> None:
        if field.type is bool:
            add_bool_flag(parser, field.name, field.default, field.metadata["help"])
            return
        HfArgumentParser._parse_dataclass_field(_OwnFlag(parser, f"--{field.name}"), field)


def _existing_dir(env: Mapping[str, str], key: str) -> str | None:
    path = env.get(key)
    return path if path and os.path.isdir(path) else None


def sagemaker_checkpoint_dir(env: Mapping[str, str]) -> str:
    """CheckpointConfig.LocalPath: `checkpoints` beside SM_MODEL_DIR (`/opt/ml/checkpoints` in SageMaker, the
    same folder of the emulated job's root when the local job runner runs it)."""
    return os.path.join(os.path.dirname(env["SM_MODEL_DIR"].rstrip("/")), "checkpoints")


def environment_defaults(env: Mapping[str, str]) -> dict[str, str | None]:
    """The path settings a SageMaker job (or MODEL_ID) fills in; None where the variable is absent."""
    return {
        "model_id": env.get("MODEL_ID"),
        "model_channel": _existing_dir(env, "SM_CHANNEL_MODEL"),
        "train_data": env.get("SM_CHANNEL_TRAINING"),
        "eval_data": env.get("SM_CHANNEL_EVAL"),
        "output_dir": env.get("SM_OUTPUT_DATA_DIR"),
        "model_dir": env.get("SM_MODEL_DIR"),
        "checkpoint_dir": sagemaker_checkpoint_dir(env) if "SM_MODEL_DIR" in env else None,
    }


def build_parser(env: Mapping[str, str] | None = None) -> SageMakerArgumentParser:
    """train.py's parser: a flag per field of finetune.config's setting groups, the paths defaulting to `env`."""
    parser = SageMakerArgumentParser(
        SETTING_GROUPS, description=DESCRIPTION, formatter_class=argparse.ArgumentDefaultsHelpFormatter
    )
    parser.set_defaults(**environment_defaults(os.environ if env is None else env))
    return parser


def parse_args(argv: Sequence[str] | None = None, env: Mapping[str, str] | None = None) -> TrainConfig:
    """Parse argv, resolve defaults that depend on other arguments, fail early on missing inputs; the run's
    TrainConfig."""
    parser = build_parser(env)
    config = TrainConfig(**vars(parser.parse_args(argv)))
    if config.model_channel:
        config = dataclasses.replace(config, model_id=config.model_channel)
    if not config.model_id:
        parser.error("--model_id is required (or a `model` channel)")
    if not config.train_data:
        parser.error("--train_data is required (or a `training` channel)")
    if not config.output_dir:
        parser.error("--output_dir is required outside SageMaker")
    config = dataclasses.replace(
        config,
        model_dir=config.model_dir or os.path.join(config.output_dir, "model"),
        checkpoint_dir=config.checkpoint_dir or os.path.join(config.output_dir, "checkpoints"),
    )
    _check_data_options(parser, config)
    _check_eval_options(parser, config)
    _check_pack_length(parser, config.pack_length, config.max_seq_length)
    if config.fsdp and config.method != "qlora":
        parser.error("--fsdp is implemented for --method qlora only")
    return config


def _check_data_options(parser: argparse.ArgumentParser, config: TrainConfig) -> None:
    """The held-out split and the generation budget."""
    if not 0.0 <= config.eval_fraction < 1.0:
        parser.error("--eval_fraction must be in [0, 1)")
    if not config.eval_data and config.eval_fraction == 0:
        parser.error(
            "--eval_fraction 0 without --eval_data: every run is evaluated on held-out rows; pass an "
            "`eval` channel or --eval_fraction > 0"
        )
    if config.min_eval_rows < 1 or config.eval_generations < 0 or config.eval_max_new_tokens < 1:
        parser.error("--min_eval_rows and --eval_max_new_tokens must be >= 1, --eval_generations >= 0")


def _check_pack_length(parser: argparse.ArgumentParser, value: str, max_seq_length: int) -> None:
    """`auto` or an integer from 16 to max_seq_length."""
    if value != "auto" and (not value.isdigit() or not 16 <= int(value) <= max_seq_length):
        parser.error(f"--pack_length must be `auto` or an integer from 16 to --max_seq_length ({max_seq_length})")


def _check_eval_options(parser: argparse.ArgumentParser, config: TrainConfig) -> None:
    """Early stopping and best-checkpoint selection need periodic evaluation on checkpoints they can pick."""
    wanted = [
        flag
        for flag, on in (
            ("--early_stopping_patience", config.early_stopping_patience > 0),
            ("--load_best_model", config.load_best_model),
        )
        if on
    ]
    if not wanted:
        return
    if config.eval_steps <= 0:
        parser.error(f"{wanted[0]} needs --eval_steps > 0")
    if config.save_steps % config.eval_steps:
        parser.error(
            f"{wanted[0]} needs --save_steps ({config.save_steps}) to be a multiple of --eval_steps "
            f"({config.eval_steps})"
        )
