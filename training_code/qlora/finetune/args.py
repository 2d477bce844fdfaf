"""Command-line arguments, with SageMaker defaults taken from the SM_* environment.

SageMaker script mode passes every hyperparameter as `--name value` and its paths through SM_* variables,
so in a training job nothing but hyperparameters is needed and locally you pass paths. The result is one frozen
finetune.config.TrainConfig.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # imported where it is built: stacks/ load this file alone, stdlib only (stacks/code_contract)
    from .config import TrainConfig

SAGEMAKER_CHECKPOINT_DIR = "/opt/ml/checkpoints"
_TRUE = {"1", "true", "yes", "y", "on"}
_FALSE = {"0", "false", "no", "n", "off"}


def parse_bool(value: str | bool) -> bool:
    """SageMaker hands booleans over as strings such as 'True' or 'false'."""
    if isinstance(value, bool):
        return value
    lowered = value.strip().lower()
    if lowered in _TRUE:
        return True
    if lowered in _FALSE:
        return False
    raise argparse.ArgumentTypeError(f"expected a boolean, got {value!r}")


def add_bool_flag(parser: argparse.ArgumentParser, name: str, default: bool, help_text: str) -> None:
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


def _existing_dir(env: Mapping[str, str], key: str) -> str | None:
    path = env.get(key)
    return path if path and os.path.isdir(path) else None


def sagemaker_checkpoint_dir(env: Mapping[str, str]) -> str:
    """CheckpointConfig.LocalPath: `checkpoints` beside SM_MODEL_DIR (`/opt/ml/checkpoints` in SageMaker, the
    same folder of the emulated job's root when the local job runner runs it)."""
    return os.path.join(os.path.dirname(env["SM_MODEL_DIR"].rstrip("/")), "checkpoints")


def build_parser(env: Mapping[str, str] | None = None) -> argparse.ArgumentParser:
    env = os.environ if env is None else env
    in_sagemaker = "SM_MODEL_DIR" in env
    parser = argparse.ArgumentParser(
        description="QLoRA fine-tuning (4-bit NF4 base + LoRA adapter), adapter merge and a training report.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    paths = parser.add_argument_group("paths (SageMaker fills these from SM_* variables)")
    paths.add_argument(
        "--model_id",
        default=env.get("MODEL_ID"),
        help="Hugging Face hub id or local folder; a `model` channel (SM_CHANNEL_MODEL) wins",
    )
    paths.add_argument(
        "--model_channel",
        default=_existing_dir(env, "SM_CHANNEL_MODEL"),
        help="folder of a `model` input channel, for network-isolated jobs",
    )
    paths.add_argument(
        "--train_data",
        default=env.get("SM_CHANNEL_TRAINING"),
        help="JSONL, JSON or Parquet file, a folder of them, or a saved `datasets` folder",
    )
    paths.add_argument(
        "--eval_data",
        default=env.get("SM_CHANNEL_EVAL"),
        help="evaluation data in the same forms; otherwise --eval_fraction of the training rows",
    )
    paths.add_argument(
        "--output_dir",
        default=env.get("SM_OUTPUT_DATA_DIR"),
        help="training_report.json and the adapter go here",
    )
    paths.add_argument(
        "--model_dir",
        default=env.get("SM_MODEL_DIR"),
        help="merged model (or the adapter with --no-merge); default: OUTPUT_DIR/model",
    )
    paths.add_argument(
        "--checkpoint_dir",
        default=sagemaker_checkpoint_dir(env) if in_sagemaker else None,
        help="checkpoints, synced to S3 by SageMaker; default: OUTPUT_DIR/checkpoints",
    )

    data = parser.add_argument_group("data")
    data.add_argument(
        "--eval_fraction",
        type=float,
        default=0.1,
        help="share of the distinct training rows held out for evaluation when no --eval_data is given (every "
        "run is evaluated; exact duplicates never land on both sides)",
    )
    data.add_argument(
        "--min_eval_rows",
        type=int,
        default=8,
        help="the held-out split has at least this many distinct rows; data with fewer than twice as many is "
        "refused (pass an `eval` channel instead)",
    )
    data.add_argument("--max_seq_length", type=int, default=512)
    add_bool_flag(
        data,
        "packing",
        True,
        "best-fit whole examples into blocks of up to max_seq_length, positions restarting per example so "
        "attention never crosses an example boundary",
    )
    data.add_argument(
        "--pack_length",
        default="auto",
        help="longest packed row; `auto`: the token-weighted mean example length (rounded up to 64), which "
        "keeps attention cost per token as without packing; at most max_seq_length",
    )
    add_bool_flag(
        data, "group_by_length", True, "batch rows (or packed rows) of similar length, so batches carry little padding"
    )
    add_bool_flag(
        data,
        "train_on_inputs",
        False,
        "compute the loss on prompts and system text too; default: on answers (and their EOS) only",
    )
    data.add_argument(
        "--truncation",
        choices=["drop", "keep_eos"],
        default="drop",
        help="a row longer than max_seq_length is dropped (counted in the report) or cut keeping its final EOS",
    )
    data.add_argument(
        "--chat_template",
        default="auto",
        help="`auto`: the tokenizer's own, else Llama 2 [INST]; `llama2`; or a Jinja file. Saved with the model",
    )
    for role, default_split in (("train", "train"), ("eval", "validation, valid, eval or dev")):
        data.add_argument(
            f"--{role}_split",
            default="auto",
            help=f"split of a saved DatasetDict; `auto`: {default_split} (never test)",
        )
        data.add_argument(
            f"--{role}_files",
            default="auto",
            help=f"glob of the files to read in a folder channel; `auto`: its only data file, else {role}* "
            + ("" if role == "train" else "(validation*, valid*, eval*, dev*)"),
        )

    training = parser.add_argument_group("training")
    training.add_argument(
        "--method",
        choices=["qlora", "lora", "full"],
        default="qlora",
        help="qlora: 4-bit base + LoRA; lora: full-precision base + LoRA; full: all weights",
    )
    training.add_argument("--epochs", type=float, default=1.0)
    training.add_argument("--max_steps", type=int, default=-1, help="overrides --epochs when > 0")
    training.add_argument("--learning_rate", type=float, default=2e-4)
    training.add_argument("--per_device_batch_size", type=int, default=4)
    training.add_argument("--gradient_accumulation_steps", type=int, default=1)
    training.add_argument("--weight_decay", type=float, default=0.001)
    training.add_argument("--max_grad_norm", type=float, default=0.3)
    training.add_argument("--lr_scheduler_type", default="constant_with_warmup")
    training.add_argument("--warmup_ratio", type=float, default=0.03)
    training.add_argument(
        "--optim",
        default="auto",
        help="`auto`: paged_adamw_32bit on a GPU, adamw_torch on CPU; or any Trainer optim",
    )
    training.add_argument("--seed", type=int, default=42)
    training.add_argument("--logging_steps", type=int, default=10)
    training.add_argument("--save_steps", type=int, default=50, help="checkpoint every N optimizer steps")
    training.add_argument("--save_total_limit", type=int, default=2)
    training.add_argument("--eval_steps", type=int, default=0, help="evaluate every N steps; 0: at the end only")
    add_bool_flag(training, "gradient_checkpointing", True, "recompute activations to save memory")
    add_bool_flag(training, "resume", True, "resume from the newest complete checkpoint in --checkpoint_dir")
    training.add_argument(
        "--early_stopping_patience",
        type=int,
        default=0,
        help="stop after this many evaluations without a lower eval_loss; 0: off (needs --eval_steps)",
    )
    add_bool_flag(
        training,
        "load_best_model",
        False,
        "end with the checkpoint of the lowest eval_loss instead of the last (needs --eval_steps)",
    )

    distributed = parser.add_argument_group(
        "multi-GPU / multi-node (ranks come from torchrun's LOCAL_RANK, RANK, WORLD_SIZE)"
    )
    add_bool_flag(
        distributed,
        "fsdp",
        False,
        "shard the 4-bit model over the ranks (FSDP + QLoRA, 70B class); default with WORLD_SIZE > 1: DDP, "
        "a whole model per GPU",
    )
    add_bool_flag(
        distributed,
        "sagemaker_torch_distributed_enabled",
        False,
        "SageMaker's switch to launch this script with torchrun on every GPU of every instance (read by the "
        "container, accepted here so the same hyperparameters run locally)",
    )

    lora = parser.add_argument_group("LoRA and quantization")
    lora.add_argument("--lora_r", type=int, default=64)
    lora.add_argument("--lora_alpha", type=int, default=16)
    lora.add_argument("--lora_dropout", type=float, default=0.1)
    lora.add_argument(
        "--target_modules",
        default="auto",
        help="comma-separated module names; `auto`: every linear layer but the output head, whatever the family "
        "names them, and `auto,lm_head` adds the head (a head tied to the embedding is trained as one LoRA on both)",
    )
    lora.add_argument(
        "--compute_dtype",
        choices=["bfloat16", "float16", "float32"],
        default="bfloat16",
        help="dtype of the 4-bit matmuls and of mixed precision",
    )
    add_bool_flag(lora, "double_quant", True, "quantize the quantization constants too (saves ~0.4 bit/param)")
    lora.add_argument("--quant_type", choices=["nf4", "fp4"], default="nf4")

    merge = parser.add_argument_group("merge")
    add_bool_flag(merge, "merge", True, "merge the adapter into a full-precision copy of the base model")
    merge.add_argument(
        "--merge_dtype",
        choices=["float16", "bfloat16", "float32"],
        default="float16",
        help="dtype of the reloaded base and of the saved merged model",
    )
    merge.add_argument(
        "--merge_tolerance",
        type=float,
        default=None,
        help="max |logit| gap allowed between merged and unmerged adapter model; default depends on --merge_dtype",
    )
    merge.add_argument("--max_shard_size", default="2GB")

    evaluation = parser.add_argument_group(
        "held-out evaluation (evaluation.json beside the model: base vs merged, same tokens)"
    )
    evaluation.add_argument(
        "--eval_generations", type=int, default=5, help="held-out prompts answered greedily and scored with ROUGE-L"
    )
    evaluation.add_argument("--eval_max_new_tokens", type=int, default=64, help="longest generated answer")
    return parser


def parse_args(argv: Sequence[str] | None = None, env: Mapping[str, str] | None = None) -> TrainConfig:
    """Parse argv, resolve defaults that depend on other arguments, fail early on missing inputs; the run's
    TrainConfig."""
    parser = build_parser(env)
    args = parser.parse_args(argv)
    if args.model_channel:
        args.model_id = args.model_channel
    if not args.model_id:
        parser.error("--model_id is required (or a `model` channel)")
    if not args.train_data:
        parser.error("--train_data is required (or a `training` channel)")
    if not args.output_dir:
        parser.error("--output_dir is required outside SageMaker")
    args.model_dir = args.model_dir or os.path.join(args.output_dir, "model")
    args.checkpoint_dir = args.checkpoint_dir or os.path.join(args.output_dir, "checkpoints")
    if not 0.0 <= args.eval_fraction < 1.0:
        parser.error("--eval_fraction must be in [0, 1)")
    if not args.eval_data and args.eval_fraction == 0:
        parser.error(
            "--eval_fraction 0 without --eval_data: every run is evaluated on held-out rows; pass an "
            "`eval` channel or --eval_fraction > 0"
        )
    if args.min_eval_rows < 1 or args.eval_generations < 0 or args.eval_max_new_tokens < 1:
        parser.error("--min_eval_rows and --eval_max_new_tokens must be >= 1, --eval_generations >= 0")
    _check_eval_options(parser, args)
    args.pack_length = _pack_length(parser, args.pack_length, args.max_seq_length)
    if args.fsdp and args.method != "qlora":
        parser.error("--fsdp is implemented for --method qlora only")
    from .config import TrainConfig

    return TrainConfig(**vars(args))


def _pack_length(parser: argparse.ArgumentParser, value: str, max_seq_length: int) -> int | None:
    """None for `auto`, else an integer from 16 to max_seq_length."""
    if value == "auto":
        return None
    if not value.isdigit() or not 16 <= int(value) <= max_seq_length:
        parser.error(f"--pack_length must be `auto` or an integer from 16 to --max_seq_length ({max_seq_length})")
    return int(value)


def _check_eval_options(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """Early stopping and best-checkpoint selection need periodic evaluation on checkpoints they can pick."""
    wanted = [
        flag
        for flag, on in (
            ("--early_stopping_patience", args.early_stopping_patience > 0),
            ("--load_best_model", args.load_best_model),
        )
        if on
    ]
    if not wanted:
        return
    if args.eval_steps <= 0:
        parser.error(f"{wanted[0]} needs --eval_steps > 0")
    if args.save_steps % args.eval_steps:
        parser.error(
            f"{wanted[0]} needs --save_steps ({args.save_steps}) to be a multiple of --eval_steps ({args.eval_steps})"
        )
