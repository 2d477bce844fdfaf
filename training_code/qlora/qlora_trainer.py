"""The Hugging Face Trainer set up for QLoRA: checkpoints, resume, precision, metric lines and throughput."""

from __future__ import annotations

import argparse
import os
import time
from typing import Any

from qlora_data import CausalLMCollator, ExampleDataset
from qlora_metrics import format_metrics
from qlora_model import has_gpu
from qlora_resources import peak_memory_gb
from transformers import Trainer, TrainerCallback, TrainingArguments
from transformers.trainer_utils import get_last_checkpoint


def resolve_optimizer(requested: str) -> str:
    """paged_adamw_32bit survives memory spikes on a GPU; it needs CUDA, so the CPU gets plain AdamW."""
    if requested != "auto":
        return requested
    return "paged_adamw_32bit" if has_gpu() else "adamw_torch"


def precision_flags(compute_dtype: str) -> dict[str, bool]:
    """Mixed precision for the Trainer. fp16 autocast needs a GPU; on CPU only bf16 autocast exists."""
    gpu = has_gpu()
    return {
        "bf16": compute_dtype == "bfloat16",
        "fp16": compute_dtype == "float16" and gpu,
        "use_cpu": not gpu,
    }


def training_arguments(args: argparse.Namespace, has_eval: bool) -> TrainingArguments:
    eval_every = args.eval_steps if has_eval and args.eval_steps > 0 else None
    return TrainingArguments(
        output_dir=args.checkpoint_dir,
        num_train_epochs=args.epochs,
        max_steps=args.max_steps,
        learning_rate=args.learning_rate,
        per_device_train_batch_size=args.per_device_batch_size,
        per_device_eval_batch_size=args.per_device_batch_size,
        gradient_accumulation_steps=args.gradient_accumulation_steps,
        weight_decay=args.weight_decay,
        max_grad_norm=args.max_grad_norm,
        lr_scheduler_type=args.lr_scheduler_type,
        warmup_steps=args.warmup_ratio,  # a float below 1 is a ratio of the total steps
        optim=resolve_optimizer(args.optim),
        activation_checkpointing=False,  # already enabled on the model by qlora_model.load_base_model
        train_sampling_strategy="group_by_length" if args.group_by_length else "random",
        logging_steps=args.logging_steps,
        logging_first_step=True,
        save_strategy="steps",
        save_steps=args.save_steps,
        save_total_limit=args.save_total_limit,
        eval_strategy="steps" if eval_every else "no",
        eval_steps=eval_every,
        include_num_input_tokens_seen="non_padding",
        seed=args.seed,
        remove_unused_columns=False,
        dataloader_pin_memory=has_gpu(),
        disable_tqdm=True,
        report_to="none",
        **precision_flags(args.compute_dtype),
    )


class MetricLinesCallback(TrainerCallback):
    """Prints each log as a regex-parsable line (see qlora_metrics) and measures this session's throughput.

    Tokens are the non-padding input tokens of this session (a resumed run counts only its own steps). The
    first step carries one-off costs (allocations, kernel selection), so further figures run from the end of
    the first step to the end of the last one, per wall second and per CPU second of this process.
    """

    def __init__(self) -> None:
        self.started = 0.0
        self.tokens_at_start = 0
        self.tokens = 0
        self.seconds = 0.0
        self.first_step: tuple[float, int, float] | None = None  # (wall clock, tokens seen, CPU time)
        self.last_step: tuple[float, int, float] | None = None

    def on_train_begin(self, args, state, control, **kwargs):
        self.started = time.perf_counter()
        self.tokens_at_start = state.num_input_tokens_seen

    def on_step_end(self, args, state, control, **kwargs):
        self.last_step = (time.perf_counter(), state.num_input_tokens_seen, time.process_time())
        if self.first_step is None:
            self.first_step = self.last_step

    def _throughput(self, state) -> float | None:
        self.seconds = time.perf_counter() - self.started
        self.tokens = state.num_input_tokens_seen - self.tokens_at_start
        return self.tokens / self.seconds if self.seconds > 0 and self.tokens else None

    def summary(self) -> dict[str, Any]:
        after_first = per_cpu_second = None
        if self.first_step is not None and self.last_step is not None:
            seconds = self.last_step[0] - self.first_step[0]
            tokens = self.last_step[1] - self.first_step[1]
            cpu_seconds = self.last_step[2] - self.first_step[2]
            after_first = tokens / seconds if seconds > 0 and tokens > 0 else None
            per_cpu_second = tokens / cpu_seconds if cpu_seconds > 0 and tokens > 0 else None
        return {
            "train_tokens": self.tokens,
            "train_seconds": round(self.seconds, 3),
            "tokens_per_second": self.tokens / self.seconds if self.seconds > 0 and self.tokens else None,
            "tokens_per_second_after_first_step": after_first,
            # CPU time of this process: unlike wall time, barely moved by other jobs on a shared machine.
            "tokens_per_cpu_second_after_first_step": per_cpu_second,
            "counted": "non-padding input tokens of this session, over the wall time of trainer.train()",
        }

    def on_log(self, args, state, control, logs=None, **kwargs):
        logs = logs or {}
        if "loss" in logs:
            print(
                format_metrics(
                    step=state.global_step,
                    epoch=logs.get("epoch"),
                    train_loss=logs["loss"],
                    learning_rate=logs.get("learning_rate"),
                    grad_norm=logs.get("grad_norm"),
                    tokens_per_second=self._throughput(state),
                    peak_memory_gb=peak_memory_gb(),
                ),
                flush=True,
            )
        if "eval_loss" in logs:
            print(
                format_metrics(step=state.global_step, epoch=logs.get("epoch"), eval_loss=logs["eval_loss"]),
                flush=True,
            )

    def on_train_end(self, args, state, control, **kwargs):
        self._throughput(state)


def build_trainer(
    model,
    args: argparse.Namespace,
    train: list,
    evaluation: list,
    pad_token_id: int,
    callbacks: list[TrainerCallback],
) -> Trainer:
    return Trainer(
        model=model,
        args=training_arguments(args, has_eval=bool(evaluation)),
        train_dataset=ExampleDataset(train),
        eval_dataset=ExampleDataset(evaluation) if evaluation else None,
        data_collator=CausalLMCollator(pad_token_id, pad_to_multiple_of=8 if has_gpu() else None),
        callbacks=callbacks,
    )


def newest_checkpoint(checkpoint_dir: str, resume: bool) -> str | None:
    if not resume or not os.path.isdir(checkpoint_dir):
        return None
    return get_last_checkpoint(checkpoint_dir)


def train_model(trainer: Trainer, resume_from: str | None) -> dict[str, Any]:
    result = trainer.train(resume_from_checkpoint=resume_from)
    return dict(result.metrics)
