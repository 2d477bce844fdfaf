"""Merging the adapter into a full-precision copy of the base, checked on a probe batch, for LMI serving.

The base is reloaded unquantized (fp16/bf16), not merged into the 4-bit weights, as the seed recipe did:
the served model is then a plain checkpoint that LMI loads with `option.model_id`.
"""

from __future__ import annotations

import gc
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from trl.trainer.sft_trainer import DataCollatorForLanguageModeling

from .model import DTYPES, has_gpu

# Largest allowed max|merged - unmerged logits| / max|unmerged logits| per dtype. Merging rounds W + s*B@A
# once into the dtype while the unmerged path rounds W@x and s*B@(A@x) separately, so the gap scales with the
# dtype's epsilon (fp32 ~1e-7, fp16 ~1e-3, bf16 ~8e-3) times the depth of the network.
DEFAULT_RELATIVE_TOLERANCE = {"float32": 1e-4, "float16": 1e-2, "bfloat16": 5e-2}
PROBE_ROWS = 4
PROBE_TOKENS = 64


class MergeCheckError(RuntimeError):
    """The merged model's logits drifted from the adapter model's beyond the tolerance."""


@dataclass
class MergeCheck:
    dtype: str
    max_abs_logit_diff: float
    max_abs_logit: float
    relative_diff: float
    relative_tolerance: float
    passed: bool
    probe_shape: list[int]


def probe_batch(examples: list[dict[str, list[int]]], pad_token_id: int) -> dict[str, torch.Tensor]:
    """A few examples cut to PROBE_TOKENS tokens: exercises every merged layer, cheap to run twice."""
    rows = [{"input_ids": example["input_ids"][:PROBE_TOKENS]} for example in examples[:PROBE_ROWS]]
    batch = DataCollatorForLanguageModeling(pad_token_id=pad_token_id)(rows)
    return {"input_ids": batch["input_ids"], "attention_mask": batch["attention_mask"]}


@torch.no_grad()
def probe_logits(model: torch.nn.Module, batch: dict[str, torch.Tensor]) -> torch.Tensor:
    """float32 logits at the real (non-padding) positions."""
    model.eval()
    device = next(model.parameters()).device
    logits = model(**{key: value.to(device) for key, value in batch.items()}).logits
    return logits.float().cpu()[batch["attention_mask"].bool()]


def compare_logits(
    reference: torch.Tensor, candidate: torch.Tensor, dtype: str, relative_tolerance: float | None
) -> MergeCheck:
    tolerance = DEFAULT_RELATIVE_TOLERANCE[dtype] if relative_tolerance is None else relative_tolerance
    max_diff = (reference - candidate).abs().max().item()
    scale = reference.abs().max().item()
    relative = max_diff / scale if scale > 0 else max_diff
    return MergeCheck(dtype, max_diff, scale, relative, tolerance, relative <= tolerance, list(reference.shape))


def load_full_precision(model_id: str, dtype: str):
    from transformers import AutoModelForCausalLM

    return AutoModelForCausalLM.from_pretrained(
        model_id, dtype=DTYPES[dtype], device_map="auto" if has_gpu() else {"": "cpu"}
    )


def _shares_factors(head: Any, embedding: Any) -> bool:
    """Whether the head's LoRA is the embedding's, transposed (peft's tie: head A = embedding B.T, head B =
    embedding A.T, same scaling): then both add the same delta. Compared by value, not by storage: loading the
    adapter onto a 16-bit base casts each factor to float32 on its own, which parts the shared storage."""
    names = list(getattr(head, "lora_A", {}))
    factors_a, factors_b = getattr(embedding, "lora_embedding_A", {}), getattr(embedding, "lora_embedding_B", {})
    return bool(names) and all(
        name in factors_a
        and name in factors_b
        and head.scaling[name] == embedding.scaling[name]
        and torch.equal(head.lora_A[name].weight, factors_b[name].t())
        and torch.equal(head.lora_B[name].weight, factors_a[name].t())
        for name in names
    )


def unload_tied_head(model: Any) -> bool:
    """Put the plain head back in place of its LoRA layer when that layer adds the embedding's delta.

    With ensure_weight_tying (finetune.model.attach_lora on a tied head), peft gives the head the embedding's LoRA
    factors, transposed (peft/tuners/lora/model.py, `tied_adapter`): the same delta on the one weight both layers
    share. merge_and_unload merges layer by layer, so the delta would land in that weight twice (peft 0.21.2:
    relative logit gap ~1.0 on a tiny Qwen3); the embedding's merge adds it once, which is what the adapter model
    computes. Returns whether it did.
    """
    head, embedding = model.get_output_embeddings(), model.get_input_embeddings()
    head_base = getattr(head, "base_layer", None)
    embedding_base = getattr(embedding, "base_layer", None)
    if head_base is None or embedding_base is None or head_base.weight is not embedding_base.weight:
        return False
    if not _shares_factors(head, embedding):
        return False
    model.set_output_embeddings(head_base)
    return True


def merge_adapter(
    base: Any,
    adapter_dir: str,
    dtype: str,
    batch: dict[str, torch.Tensor],
    relative_tolerance: float | None,
) -> tuple[Any, MergeCheck, torch.Tensor]:
    """The merged model, the merged-vs-unmerged check, and the merged model's probe logits.

    `base` is the full-precision base (load_full_precision); the adapter is injected into it in place.
    """
    from peft import PeftModel

    adapted = PeftModel.from_pretrained(base, adapter_dir)
    unmerged = probe_logits(adapted, batch)
    with warnings.catch_warnings():
        if unload_tied_head(adapted.get_base_model()):
            # peft's advice to untie first: the probe check below shows the tied merge is exact
            warnings.filterwarnings("ignore", message="Model with `tie_word_embeddings=True`")
        merged = adapted.merge_and_unload()
    merged_logits = probe_logits(merged, batch)
    return merged, compare_logits(unmerged, merged_logits, dtype, relative_tolerance), merged_logits


def save_for_serving(model, tokenizer, model_dir: str, max_shard_size: str) -> list[str]:
    """safetensors shards plus tokenizer, the layout LMI's option.model_id expects; returns the file names."""
    out = Path(model_dir)
    out.mkdir(parents=True, exist_ok=True)
    model.config.use_cache = True
    model.save_pretrained(out, max_shard_size=max_shard_size)
    tokenizer.save_pretrained(out)
    return sorted(path.name for path in out.iterdir())


def free_memory() -> None:
    gc.collect()
    if torch.cuda.is_available():
        torch.cuda.empty_cache()
