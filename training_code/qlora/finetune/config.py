"""The settings of one run, each declared once: its type, default and help text live on its field here, train.py's
parser is built from these dataclasses (finetune.args, transformers' HfArgumentParser) and the stacks read them to
check hyperparameters at synth (stacks/code_contract/qlora.py loads this file alone: standard library only).

Each group of flags is one dataclass (its `_argument_group_name` heads it in --help); TrainConfig, the run's frozen
settings read by every step (data, model, trainer, merge, evaluation, report), is all of them together.
"""

from __future__ import annotations

import argparse
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

# The spellings of a boolean train.py accepts: SageMaker's toolkit sends hyperparameters as strings ("True").
TRUE_WORDS = frozenset({"1", "true", "yes", "y", "on"})
FALSE_WORDS = frozenset({"0", "false", "no", "n", "off"})


def parse_bool(value: str | bool) -> bool:
    """SageMaker hands booleans over as strings such as 'True' or 'false'."""
    if isinstance(value, bool):
        return value
    lowered = value.strip().lower()
    if lowered in TRUE_WORDS:
        return True
    if lowered in FALSE_WORDS:
        return False
    raise argparse.ArgumentTypeError(f"expected a boolean, got {value!r}")


def _help(text: str) -> dict[str, str]:
    return {"help": text}


@dataclass(frozen=True, kw_only=True)
class PathSettings:
    """Where the run reads and writes; in a SageMaker job their defaults come from SM_* (finetune.args)."""

    _argument_group_name = "paths (SageMaker fills these from SM_* variables)"

    model_id: str | None = field(
        default=None, metadata=_help("Hugging Face hub id or local folder; a `model` channel (SM_CHANNEL_MODEL) wins")
    )
    model_channel: str | None = field(
        default=None, metadata=_help("folder of a `model` input channel, for network-isolated jobs")
    )
    train_data: str | None = field(
        default=None, metadata=_help("JSONL, JSON or Parquet file, a folder of them, or a saved `datasets` folder")
    )
    eval_data: str | None = field(
        default=None,
        metadata=_help("evaluation data in the same forms; otherwise --eval_fraction of the training rows"),
    )
    output_dir: str | None = field(default=None, metadata=_help("training_report.json and the adapter go here"))
    model_dir: str | None = field(
        default=None, metadata=_help("merged model (or the adapter with --no-merge); default: OUTPUT_DIR/model")
    )
    checkpoint_dir: str | None = field(
        default=None, metadata=_help("checkpoints, synced to S3 by SageMaker; default: OUTPUT_DIR/checkpoints")
    )


@dataclass(frozen=True, kw_only=True)
class DataSettings:
    """How rows become training examples."""

    _argument_group_name = "data"

    eval_fraction: float = field(
        default=0.1,
        metadata=_help(
            "share of the distinct training rows held out for evaluation when no --eval_data is given (every "
            "run is evaluated; exact duplicates never land on both sides)"
        ),
    )
    min_eval_rows: int = field(
        default=8,
        metadata=_help(
            "the held-out split has at least this many distinct rows; data with fewer than twice as many is "
            "refused (pass an `eval` channel instead)"
        ),
    )
    max_seq_length: int = 512
    packing: bool = field(
        default=True,
        metadata=_help(
            "best-fit whole examples into blocks of up to max_seq_length, positions restarting per example so "
            "attention never crosses an example boundary"
        ),
    )
    pack_length: str = field(
        default="auto",
        metadata=_help(
            "longest packed row; `auto`: the token-weighted mean example length (rounded up to 64), which "
            "keeps attention cost per token as without packing; at most max_seq_length"
        ),
    )
    group_by_length: bool = field(
        default=True, metadata=_help("batch rows (or packed rows) of similar length, so batches carry little padding")
    )
    train_on_inputs: bool = field(
        default=False,
        metadata=_help("compute the loss on prompts and system text too; default: on answers (and their EOS) only"),
    )
    truncation: Literal["drop", "keep_eos"] = field(
        default="drop",
        metadata=_help(
            "a row longer than max_seq_length is dropped (counted in the report) or cut keeping its final EOS"
        ),
    )
    chat_template: str = field(
        default="auto",
        metadata=_help(
            "`auto`: the tokenizer's own, else Llama 2 [INST]; `llama2`; or a Jinja file. Saved with the model"
        ),
    )
    train_split: str = field(default="auto", metadata=_help("split of a saved DatasetDict; `auto`: train (never test)"))
    train_files: str = field(
        default="auto",
        metadata=_help("glob of the files to read in a folder channel; `auto`: its only data file, else train* "),
    )
    eval_split: str = field(
        default="auto",
        metadata=_help("split of a saved DatasetDict; `auto`: validation, valid, eval or dev (never test)"),
    )
    eval_files: str = field(
        default="auto",
        metadata=_help(
            "glob of the files to read in a folder channel; `auto`: its only data file, else eval* "
            "(validation*, valid*, eval*, dev*)"
        ),
    )

    @property
    def pack_tokens(self) -> int | None:
        """--pack_length in tokens; None for `auto` (finetune.data.auto_pack_length of the training examples)."""
        return None if self.pack_length == "auto" else int(self.pack_length)


@dataclass(frozen=True, kw_only=True)
class TrainingSettings:
    """The optimisation: method, schedule, checkpoints, early stopping."""

    _argument_group_name = "training"

    method: Literal["qlora", "lora", "full"] = field(
        default="qlora",
        metadata=_help("qlora: 4-bit base + LoRA; lora: full-precision base + LoRA; full: all weights"),
    )
    epochs: float = 1.0
    max_steps: int = field(default=-1, metadata=_help("overrides --epochs when > 0"))
    learning_rate: float = 2e-4
    per_device_batch_size: int = 4
    gradient_accumulation_steps: int = 1
    weight_decay: float = 0.001
    max_grad_norm: float = 0.3
    lr_scheduler_type: str = "constant_with_warmup"
    warmup_ratio: float = 0.03
    optim: str = field(
        default="auto", metadata=_help("`auto`: paged_adamw_32bit on a GPU, adamw_torch on CPU; or any Trainer optim")
    )
    seed: int = 42
    logging_steps: int = 10
    save_steps: int = field(default=50, metadata=_help("checkpoint every N optimizer steps"))
    save_total_limit: int = 2
    eval_steps: int = field(default=0, metadata=_help("evaluate every N steps; 0: at the end only"))
    gradient_checkpointing: bool = field(default=True, metadata=_help("recompute activations to save memory"))
    resume: bool = field(default=True, metadata=_help("resume from the newest complete checkpoint in --checkpoint_dir"))
    early_stopping_patience: int = field(
        default=0,
        metadata=_help("stop after this many evaluations without a lower eval_loss; 0: off (needs --eval_steps)"),
    )
    load_best_model: bool = field(
        default=False,
        metadata=_help("end with the checkpoint of the lowest eval_loss instead of the last (needs --eval_steps)"),
    )


@dataclass(frozen=True, kw_only=True)
class DistributedSettings:
    """More than one GPU: the ranks come from torchrun's environment, these pick how they share the model."""

    _argument_group_name = "multi-GPU / multi-node (ranks come from torchrun's LOCAL_RANK, RANK, WORLD_SIZE)"

    fsdp: bool = field(
        default=False,
        metadata=_help(
            "shard the 4-bit model over the ranks (FSDP + QLoRA, 70B class); default with WORLD_SIZE > 1: DDP, "
            "a whole model per GPU"
        ),
    )
    sagemaker_torch_distributed_enabled: bool = field(
        default=False,
        metadata=_help(
            "SageMaker's switch to launch this script with torchrun on every GPU of every instance (read by the "
            "container, accepted here so the same hyperparameters run locally)"
        ),
    )


@dataclass(frozen=True, kw_only=True)
class LoraSettings:
    """The adapter and the 4-bit base it trains on."""

    _argument_group_name = "LoRA and quantization"

    lora_r: int = 64
    lora_alpha: int = 16
    lora_dropout: float = 0.1
    target_modules: str = field(
        default="auto",
        metadata=_help(
            "comma-separated module names; `auto`: every linear layer but the output head, whatever the family "
            "names them, and `auto,lm_head` adds the head (a head tied to the embedding is trained as one LoRA on "
            "both)"
        ),
    )
    compute_dtype: Literal["bfloat16", "float16", "float32"] = field(
        default="bfloat16", metadata=_help("dtype of the 4-bit matmuls and of mixed precision")
    )
    double_quant: bool = field(
        default=True, metadata=_help("quantize the quantization constants too (saves ~0.4 bit/param)")
    )
    quant_type: Literal["nf4", "fp4"] = "nf4"


@dataclass(frozen=True, kw_only=True)
class MergeSettings:
    """The full-precision model served after training."""

    _argument_group_name = "merge"

    merge: bool = field(default=True, metadata=_help("merge the adapter into a full-precision copy of the base model"))
    merge_dtype: Literal["float16", "bfloat16", "float32"] = field(
        default="float16", metadata=_help("dtype of the reloaded base and of the saved merged model")
    )
    merge_tolerance: float | None = field(
        default=None,
        metadata=_help(
            "max |logit| gap allowed between merged and unmerged adapter model; default depends on --merge_dtype"
        ),
    )
    max_shard_size: str = "2GB"


@dataclass(frozen=True, kw_only=True)
class EvaluationSettings:
    """What the held-out comparison of base and merged model generates."""

    _argument_group_name = "held-out evaluation (evaluation.json beside the model: base vs merged, same tokens)"

    eval_generations: int = field(
        default=5, metadata=_help("held-out prompts answered greedily and scored with ROUGE-L")
    )
    eval_max_new_tokens: int = field(default=64, metadata=_help("longest generated answer"))


# In the order --help lists them.
SETTING_GROUPS = (
    PathSettings,
    DataSettings,
    TrainingSettings,
    DistributedSettings,
    LoraSettings,
    MergeSettings,
    EvaluationSettings,
)


@dataclass(frozen=True, kw_only=True)
class TrainConfig(
    EvaluationSettings, MergeSettings, LoraSettings, DistributedSettings, TrainingSettings, DataSettings, PathSettings
):
    """Every setting of the run (fields in SETTING_GROUPS order: a dataclass collects its bases' fields from the
    last base to the first); finetune.args.parse_args has filled the paths and checked the combinations."""

    def as_dict(self) -> dict[str, Any]:
        """The settings as the report records them (`arguments`): --pack_length in tokens, None for `auto`."""
        return {**asdict(self), "pack_length": self.pack_tokens}
