"""TRL's SFTTrainer set up for QLoRA from the run's TrainConfig: checkpoints, resume, precision, metric lines and
throughput.

The data arrive tokenized, labelled and packed (finetune.data), so TRL's dataset preparation passes them through
(an `input_ids` column: already processed; a `labels` column: kept as is; max_length None: no second
truncation), and its DataCollatorForLanguageModeling batches them: padded rows with an attention_mask, or, with
packing, padding-free rows whose position_ids restart at each example and whose first label per example is
ignored.
"""

from __future__ import annotations

import time
from typing import Any

from transformers import EarlyStoppingCallback, Trainer, TrainerCallback
from trl import SFTConfig, SFTTrainer

from .checkpoints import newest_complete_checkpoint
from .config import TrainConfig
from .cpu_4bit import TrainingLayoutGuard
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


def _evaluation_arguments(config: TrainConfig, has_eval: bool) -> dict[str, Any]:
    eval_every = config.eval_steps if has_eval and config.eval_steps > 0 else None
    selecting = bool(eval_every) and (config.load_best_model or config.early_stopping_patience > 0)
    return {
        "eval_strategy": "steps" if eval_every else "no",
        "eval_steps": eval_every,
        "load_best_model_at_end": selecting,
        "metric_for_best_model": "eval_loss" if selecting else None,
        "greater_is_better": False if selecting else None,
    }


def _parallel_arguments(config: TrainConfig) -> dict[str, Any]:
    """DDP settings when torchrun started several ranks (a backend set in one process would make it wait for
    others), or FSDP + QLoRA."""
    parallel: dict[str, Any] = {}
    if current_world().distributed:
        parallel["ddp_backend"] = ddp_backend(has_gpu())
        # LoRA leaves every trainable parameter in the graph; searching for unused ones costs a traversal.
        parallel["ddp_find_unused_parameters"] = False
    if config.fsdp:
        parallel["fsdp"] = True
        parallel["fsdp_config"] = fsdp_config(config.gradient_checkpointing)
    return parallel


def _batching_arguments(config: TrainConfig) -> dict[str, Any]:
    """TRL's collator: padding-free rows for packed data (every token real: all are counted), else padded rows
    (the attention_mask counts the real tokens; pad may equal EOS, so the pad id cannot)."""
    return {
        "max_length": None,  # finetune.data already fit every example to max_seq_length (drop or keep_eos)
        "packing": False,  # already packed by finetune.data (whole examples, longer ones in rows of their own)
        "padding_free": config.packing,
        "pad_to_multiple_of": 8 if has_gpu() and not config.packing else None,
        "include_num_input_tokens_seen": "all" if config.packing else "non_padding",
    }


def sft_config(config: TrainConfig, has_eval: bool) -> SFTConfig:
    return SFTConfig(
        output_dir=config.checkpoint_dir,
        num_train_epochs=config.epochs,
        max_steps=config.max_steps,
        learning_rate=config.learning_rate,
        per_device_train_batch_size=config.per_device_batch_size,
        per_device_eval_batch_size=config.per_device_batch_size,
        gradient_accumulation_steps=config.gradient_accumulation_steps,
        weight_decay=config.weight_decay,
        max_grad_norm=config.max_grad_norm,
        lr_scheduler_type=config.lr_scheduler_type,
        warmup_steps=config.warmup_ratio,  # a float below 1 is a ratio of the total steps
        optim=resolve_optimizer(config.optim),
        activation_checkpointing=False,  # already enabled on the model by finetune.model.load_base_model
        train_sampling_strategy="group_by_length" if config.group_by_length else "random",
        logging_steps=config.logging_steps,
        logging_first_step=True,
        save_strategy="steps",
        save_steps=config.save_steps,
        save_total_limit=config.save_total_limit,
        seed=config.seed,
        remove_unused_columns=False,
        dataloader_pin_memory=has_gpu(),
        disable_tqdm=True,
        report_to="none",
        **_batching_arguments(config),
        **_evaluation_arguments(config, has_eval),
        **_parallel_arguments(config),
        **precision_flags(config.compute_dtype),
    )


class QLoRATrainer(SFTTrainer):
    """TRL's SFTTrainer with the model's own loss, the adapter weights in the dtype they were created in, and eval
    loss token-weighted.

    SFTTrainer's loss runs a fused LM head that projects with `lm_head.weight` directly, so it cannot train a LoRA
    adapter on the output head (it refuses one), which the demo's recipe targets (local/demo.py: 200 steps, train
    loss 2.02 without the head, 0.86 with it). compute_loss is therefore the model's own causal-LM loss, summed
    over the batch's supervised tokens / their count, as the Trainer computes it. SFTTrainer also casts a quantized
    model's trainable weights to bfloat16 (the QLoRA paper's choice); this project trains them in float32 (PEFT's
    default) under every --compute_dtype, so they are put back, bit for bit. Its eval loss is the mean of
    per-batch means, which weighs a token in a sparse batch more; ours is summed loss over every supervised eval
    token / their count, as the training loss is.
    """

    def __init__(self, model, **kwargs):
        trainable = {name: param.data for name, param in model.named_parameters() if param.requires_grad}
        if hasattr(model, "peft_config"):  # hides a LoRA head from SFTTrainer's refusal, see the class docstring
            model.get_output_embeddings = lambda: None
        try:
            super().__init__(model=model, **kwargs)
        finally:
            vars(model).pop("get_output_embeddings", None)
        for name, param in self.model.named_parameters():
            if name in trainable and param.data.dtype != trainable[name].dtype:
                param.data = trainable[name]

    def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
        return Trainer.compute_loss(self, model, inputs, return_outputs, num_items_in_batch)

    def create_model_card(self, *args, **kwargs) -> None:
        """None in the checkpoint folder (SFTTrainer writes a hub card there at every checkpoint): the card is
        finetune.card's, beside the saved model."""

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


def build_trainer(model, config: TrainConfig, data, tokenizer, callbacks: list[TrainerCallback]) -> SFTTrainer:
    """The trainer over finetune.data's PreparedData."""
    from datasets import Dataset

    args = sft_config(config, has_eval=bool(data.eval))
    if config.method == "qlora":
        callbacks = [*callbacks, TrainingLayoutGuard()]
    if args.load_best_model_at_end and config.early_stopping_patience > 0:
        callbacks = [*callbacks, EarlyStoppingCallback(early_stopping_patience=config.early_stopping_patience)]
    return QLoRATrainer(
        model=model,
        args=args,
        train_dataset=Dataset.from_list(data.train),
        eval_dataset=Dataset.from_list(data.eval) if data.eval else None,
        processing_class=tokenizer,
        callbacks=callbacks,
    )


def resume_checkpoint(checkpoint_dir: str, resume: bool) -> tuple[str | None, list[dict[str, str]]]:
    """The newest complete checkpoint (None when starting over) and the incomplete newer ones skipped."""
    if not resume:
        return None, []
    return newest_complete_checkpoint(checkpoint_dir)


def train_model(trainer: SFTTrainer, resume_from: str | None) -> dict[str, Any]:
    result = trainer.train(resume_from_checkpoint=resume_from)
    return dict(result.metrics)
