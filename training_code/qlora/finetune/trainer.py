"""The Hugging Face Trainer set up for QLoRA: checkpoints, resume, precision, metric lines and throughput."""

from __future__ import annotations

import argparse
import time
from typing import Any

from transformers import EarlyStoppingCallback, Trainer, TrainerCallback, TrainingArguments

from .checkpoints import newest_complete_checkpoint
from .data import REAL_TOKENS_KEY, CausalLMCollator, ExampleDataset
from .distributed import current_world, ddp_backend, fsdp_config
from .metrics import format_metrics
from .model import has_gpu
from .resources import peak_memory_gb


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


def _evaluation_arguments(args: argparse.Namespace, has_eval: bool) -> dict[str, Any]:
    eval_every = args.eval_steps if has_eval and args.eval_steps > 0 else None
    selecting = bool(eval_every) and (args.load_best_model or args.early_stopping_patience > 0)
    return {
        "eval_strategy": "steps" if eval_every else "no",
        "eval_steps": eval_every,
        "load_best_model_at_end": selecting,
        "metric_for_best_model": "eval_loss" if selecting else None,
        "greater_is_better": False if selecting else None,
    }


def _parallel_arguments(args: argparse.Namespace) -> dict[str, Any]:
    """DDP settings when torchrun started several ranks (a backend set in one process would make it wait for
    others), or FSDP + QLoRA."""
    parallel: dict[str, Any] = {}
    if current_world().distributed:
        parallel["ddp_backend"] = ddp_backend(has_gpu())
        # LoRA leaves every trainable parameter in the graph; searching for unused ones costs a traversal.
        parallel["ddp_find_unused_parameters"] = False
    if args.fsdp:
        parallel["fsdp"] = True
        parallel["fsdp_config"] = fsdp_config(args.gradient_checkpointing)
    return parallel


def training_arguments(args: argparse.Namespace, has_eval: bool) -> TrainingArguments:
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
        activation_checkpointing=False,  # already enabled on the model by finetune.model.load_base_model
        train_sampling_strategy="group_by_length" if args.group_by_length else "random",
        logging_steps=args.logging_steps,
        logging_first_step=True,
        save_strategy="steps",
        save_steps=args.save_steps,
        save_total_limit=args.save_total_limit,
        include_num_input_tokens_seen="non_padding",
        seed=args.seed,
        remove_unused_columns=False,
        dataloader_pin_memory=has_gpu(),
        disable_tqdm=True,
        report_to="none",
        **_evaluation_arguments(args, has_eval),
        **_parallel_arguments(args),
        **precision_flags(args.compute_dtype),
    )


class QLoRATrainer(Trainer):
    """The Trainer, counting the collator's real (non-padding) tokens, which the model must not receive, and
    reporting eval loss token-weighted.

    Packed batches carry position_ids and no attention_mask, so the Trainer's own non-padding count (pad id,
    which equals EOS for Llama) would be wrong. Its eval loss is the mean of per-batch means (each a mean over
    that batch's packed rows' tokens), which weighs a token in a sparse batch more; ours is summed loss over
    every supervised eval token / their count, as the training loss is.
    """

    def evaluation_loop(
        self, dataloader, description, prediction_loss_only=None, ignore_keys=None, metric_key_prefix="eval"
    ):
        import torch
        from transformers.trainer_utils import EvalLoopOutput

        from .evaluate import row_losses

        model = self.model_wrapped if self.is_fsdp_enabled else self.model  # FSDP: every rank runs forward
        model.eval()
        total = torch.zeros(2, dtype=torch.float64)
        for inputs in dataloader:
            with torch.no_grad(), self.autocast_smart_context_manager():
                per_row = row_losses(model, self._prepare_inputs(inputs))
            # gather_for_metrics drops the rows repeated to even out the ranks' last batches.
            total += self.accelerator.gather_for_metrics(per_row).sum(0).double().cpu()
        metrics = {
            f"{metric_key_prefix}_loss": float(total[0] / total[1]),
            f"{metric_key_prefix}_label_tokens": int(total[1]),
        }
        return EvalLoopOutput(predictions=None, label_ids=None, metrics=metrics, num_samples=len(dataloader.dataset))

    def compute_loss(self, model, inputs, *args, **kwargs):
        model_inputs = {key: value for key, value in inputs.items() if key != REAL_TOKENS_KEY}
        return super().compute_loss(model, model_inputs, *args, **kwargs)

    def _track_num_input_tokens(self, inputs):
        import torch

        if REAL_TOKENS_KEY not in inputs:
            return super()._track_num_input_tokens(inputs)
        tokens = torch.as_tensor(inputs[REAL_TOKENS_KEY], device=self.args.device, dtype=torch.int64)
        self.state.num_input_tokens_seen += self.accelerator.gather(tokens).sum().item()
        return None


class MetricLinesCallback(TrainerCallback):
    """Prints each log as a regex-parsable line (see finetune.metrics) and measures this session's throughput.

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
        if not state.is_world_process_zero:  # one line per step for the metric scraper, not one per rank
            return
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
    training_args = training_arguments(args, has_eval=bool(evaluation))
    if training_args.load_best_model_at_end and args.early_stopping_patience > 0:
        callbacks = [*callbacks, EarlyStoppingCallback(early_stopping_patience=args.early_stopping_patience)]
    return QLoRATrainer(
        model=model,
        args=training_args,
        train_dataset=ExampleDataset(train),
        eval_dataset=ExampleDataset(evaluation) if evaluation else None,
        data_collator=CausalLMCollator(pad_token_id, pad_to_multiple_of=8 if has_gpu() else None),
        callbacks=callbacks,
    )


def resume_checkpoint(checkpoint_dir: str, resume: bool) -> tuple[str | None, list[dict[str, str]]]:
    """The newest complete checkpoint (None when starting over) and the incomplete newer ones skipped."""
    if not resume:
        return None, []
    return newest_complete_checkpoint(checkpoint_dir)


def train_model(trainer: Trainer, resume_from: str | None) -> dict[str, Any]:
    result = trainer.train(resume_from_checkpoint=resume_from)
    return dict(result.metrics)
