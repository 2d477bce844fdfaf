"""Training steps of one recipe in this process, on the model's device, for interleaved speed comparisons.

Mirrors what the Trainer does (same argument parsing, data preparation, sampler, collator, loading code,
autocast in the compute dtype, AdamW, clipping) so that recipes stepped in turn share the same moments of
machine load and their ratios stay meaningful. On a GPU, batches go to the model's device and each step ends
with a synchronize, so wall time is device time.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "training_code" / "qlora"))


def recipe_args(model: Path, data: Path, seq_len: int, batch: int, flags: list[str]):
    from finetune.args import parse_args

    return parse_args(
        [
            "--model_id",
            str(model),
            "--train_data",
            str(data),
            "--output_dir",
            "/dev/null",
            "--max_seq_length",
            str(seq_len),
            "--per_device_batch_size",
            str(batch),
            *flags,
        ],
        env={},
    )


def prepared_examples(args, tokenizer) -> tuple[list[dict], dict]:
    """Every row trained on (no hold-out), as finetune.data prepares them."""
    from dataclasses import replace

    from finetune.data import prepare_data
    from finetune.templates import resolve_chat_template

    template, _ = resolve_chat_template(tokenizer, args.chat_template)
    prepared = prepare_data(tokenizer, replace(args, eval_data=None, eval_fraction=0.0), template)
    return prepared.train, prepared.summary


def real_tokens(batch: dict) -> int:
    """Non-padding tokens of a collated batch: its attention_mask, or every token of a padding-free batch."""
    mask = batch.get("attention_mask")
    return int(mask.sum()) if mask is not None else batch["input_ids"].numel()


def batch_loader(args, examples: list[dict], pad_token_id: int, gpu: bool):
    """The Trainer's sampler (length-grouped or random) and TRL's collator, set as finetune.trainer sets it."""
    import torch
    from finetune.trainer import sft_config
    from transformers.trainer_pt_utils import LengthGroupedSampler
    from trl.trainer.sft_trainer import DataCollatorForLanguageModeling

    generator = torch.Generator().manual_seed(args.seed)
    batch = args.per_device_batch_size
    sampler = (
        LengthGroupedSampler(batch, dataset=examples, generator=generator)
        if args.group_by_length
        else torch.utils.data.RandomSampler(examples, generator=generator)
    )
    settings = sft_config(args, has_eval=False)
    collate = DataCollatorForLanguageModeling(
        pad_token_id=pad_token_id, padding_free=settings.padding_free, pad_to_multiple_of=settings.pad_to_multiple_of
    )
    return torch.utils.data.DataLoader(examples, batch_size=batch, sampler=sampler, collate_fn=collate)


class RecipeRunner:
    def __init__(self, model: Path, data: Path, seq_len: int, batch: int, flags: list[str]) -> None:
        import torch
        from finetune.model import attach_lora, has_gpu, load_base_model, load_tokenizer, resolve_target_modules

        args = recipe_args(model, data, seq_len, batch, flags)
        self.gpu = has_gpu()
        tokenizer = load_tokenizer(args.model_id)
        examples, self.summary = prepared_examples(args, tokenizer)
        self.loader = batch_loader(args, examples, tokenizer.pad_token_id, self.gpu)
        self.batches = iter(self.loader)
        model_ = load_base_model(args)
        if args.method != "full":
            model_ = attach_lora(model_, resolve_target_modules(model_, "auto"), args)
        self.model = model_.train()
        self.device = next(self.model.parameters()).device
        self.trainable = [p for p in self.model.parameters() if p.requires_grad]
        self.optimizer = torch.optim.AdamW(self.trainable, lr=args.learning_rate, weight_decay=args.weight_decay)
        self.dtype = {"bfloat16": torch.bfloat16, "float16": torch.float16}.get(args.compute_dtype)
        self.max_grad_norm = args.max_grad_norm
        self.samples: list[tuple[int, int, float]] = []  # (real tokens, positions, wall seconds) per step

    def _next_batch(self) -> dict:
        try:
            return next(self.batches)
        except StopIteration:
            self.batches = iter(self.loader)
            return next(self.batches)

    def step(self) -> None:
        import torch

        batch = self._next_batch()
        real = real_tokens(batch)
        positions = batch["input_ids"].numel()
        batch = {key: value.to(self.device) if torch.is_tensor(value) else value for key, value in batch.items()}
        started = time.perf_counter()
        with torch.autocast(self.device.type, dtype=self.dtype or torch.float32, enabled=self.dtype is not None):
            loss = self.model(**batch).loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_(self.trainable, self.max_grad_norm)
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)
        if self.gpu:
            torch.cuda.synchronize()
        self.samples.append((real, positions, time.perf_counter() - started))

    def throughput(self) -> dict[str, float]:
        """Real tokens per second over all steps but the first (warm-up)."""
        measured = self.samples[1:]
        tokens = sum(sample[0] for sample in measured)
        return {
            "tokens_per_second": round(tokens / sum(sample[2] for sample in measured), 2),
            "real_token_share": round(tokens / sum(sample[1] for sample in measured), 4),
            "mean_real_tokens_per_step": round(tokens / len(measured), 1),
            "steps_measured": len(measured),
        }


def interleave(runners: dict[str, RecipeRunner], rounds: int) -> dict[str, dict]:
    """One step of each recipe per round, the order rotating every round."""
    names = list(runners)
    for round_index in range(rounds):
        shift = round_index % len(names)
        for name in names[shift:] + names[:shift]:
            runners[name].step()
    return {name: runner.throughput() for name, runner in runners.items()}
