"""Tiny random-init models of each family a user brings, keeping what tells the family apart.

Each config is the published model's shape scaled down: the same config class, the same fields that change the
weights or the forward pass (K/V heads, rope type, tied head, q/k norms, fused projections, multipliers, no-rope
layers), the published values of the fields that are numbers rather than sizes. Every size is chosen so that
the whole chain runs here: hidden and intermediate sizes are multiples of 64 (bitsandbytes' CPU 4-bit kernels
quantize in blocks of 64 input features) and the head size is one vLLM's CPU attention takes (32, 64, 80, ...;
`CPUAttentionBackend.get_supported_head_sizes` in vLLM 0.32, which has no 16).

CLI: python -m finetune.tiny --family qwen3 --out DIR --data FILE (finetune/tiny.py).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

HIDDEN = 128
INTERMEDIATE = 256
LAYERS = 2
HEADS = 4  # head size 32 at HIDDEN 128
KV_HEADS = 2  # grouped-query attention: two query heads share each K/V head
POSITIONS = 512
# Llama 3's rope scaling (Llama-3.1-8B-Instruct's config.json; 3.2 has factor 32): the original context is scaled
# down with the model so that the scaling changes frequencies inside the tiny context too.
LLAMA3_ROPE = {"rope_type": "llama3", "low_freq_factor": 1.0, "high_freq_factor": 4.0, "rope_theta": 500000.0}
LLAMA3_ORIGINAL_POSITIONS = 64
# granite-3.x-8b-instruct's config.json
GRANITE_MULTIPLIERS = {
    "embedding_multiplier": 12.0,
    "residual_multiplier": 0.22,
    "attention_multiplier": 0.0078125,
    "logits_scaling": 16.0,
}


@dataclass(frozen=True, kw_only=True)
class Family:
    """One family: its config class (transformers' name), what the tiny config keeps, and the family's fields
    (a function, so each config gets dicts of its own: transformers completes rope_parameters in place)."""

    config_class: str
    keeps: str
    fields: Callable[[], dict[str, Any]]


def _llama3(factor: float, tied: bool) -> Callable[[], dict[str, Any]]:
    def fields() -> dict[str, Any]:
        rope = {**LLAMA3_ROPE, "factor": factor, "original_max_position_embeddings": LLAMA3_ORIGINAL_POSITIONS}
        return {"num_key_value_heads": KV_HEADS, "rope_parameters": rope, "tie_word_embeddings": tied}

    return fields


FAMILIES: dict[str, Family] = {
    "llama3": Family(
        config_class="LlamaConfig",
        keeps="GQA, llama3 rope scaling (factor 8), untied head",
        fields=_llama3(8.0, tied=False),
    ),
    "llama3.2": Family(
        config_class="LlamaConfig",
        keeps="GQA, llama3 rope scaling (factor 32), head tied to the embedding",
        fields=_llama3(32.0, tied=True),
    ),
    "qwen3": Family(
        config_class="Qwen3Config",
        keeps="q_norm/k_norm, head size set apart from hidden/heads (4 x 64 > 128), GQA, tied head",
        fields=lambda: {
            "num_key_value_heads": KV_HEADS,
            "head_dim": 64,
            "tie_word_embeddings": True,
            "rope_parameters": {"rope_type": "default", "rope_theta": 1000000.0},
        },
    ),
    "mistral": Family(
        config_class="MistralConfig",
        keeps="GQA, sliding window (16 tokens: shorter than the prompt and answer), untied head",
        fields=lambda: {"num_key_value_heads": KV_HEADS, "sliding_window": 16, "tie_word_embeddings": False},
    ),
    "phi3": Family(
        config_class="Phi3Config",
        keeps="fused qkv_proj and gate_up_proj, every head its own K/V (Phi-3.5-mini), untied head",
        fields=lambda: {
            "num_key_value_heads": HEADS,
            "tie_word_embeddings": False,
            "original_max_position_embeddings": POSITIONS,
        },
    ),
    "granite": Family(
        config_class="GraniteConfig",
        keeps="embedding/residual/attention multipliers and logits scaling (granite-3.x-8b's), GQA, tied head",
        fields=lambda: {"num_key_value_heads": KV_HEADS, "tie_word_embeddings": True, **GRANITE_MULTIPLIERS},
    ),
    "smollm3": Family(
        config_class="SmolLM3Config",
        keeps="no-rope layers (every 2nd here, every 4th in SmolLM3-3B), GQA, tied head",
        fields=lambda: {"num_key_value_heads": KV_HEADS, "no_rope_layer_interval": 2, "tie_word_embeddings": True},
    ),
}


def tiny_family_config(
    family: str,
    tokenizer,
    hidden_size: int = HIDDEN,
    num_layers: int = LAYERS,
    intermediate_size: int = INTERMEDIATE,
    max_position_embeddings: int = POSITIONS,
):
    """The family's config class with the tiny sizes, sized to the tokenizer; KeyError names the families."""
    import transformers

    if family not in FAMILIES:
        raise KeyError(f"no tiny family {family!r}; one of: {', '.join(FAMILIES)}")
    spec = FAMILIES[family]
    return getattr(transformers, spec.config_class)(
        vocab_size=len(tokenizer),
        hidden_size=hidden_size,
        intermediate_size=intermediate_size,
        num_hidden_layers=num_layers,
        num_attention_heads=HEADS,
        max_position_embeddings=max_position_embeddings,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        # Phi-3's default pad id (32000) lies outside a tiny vocabulary; the tokenizer pads with EOS
        pad_token_id=tokenizer.eos_token_id,
        **spec.fields(),
    )


def build_tiny_family(
    out_dir: str | Path,
    family: str,
    vocab_texts: Iterable[str],
    chat_template: bool | str = True,
    vocab_size: int = 512,
    hidden_size: int = HIDDEN,
    num_layers: int = LAYERS,
    seed: int = 0,
) -> Path:
    """Train a tokenizer on vocab_texts, random-init the family's tiny model, save both; returns out_dir."""
    import torch
    from transformers import AutoModelForCausalLM

    from .tiny_tokenizer import TINY_CHAT_TEMPLATE, train_tokenizer

    template = TINY_CHAT_TEMPLATE if chat_template is True else (chat_template or None)
    tokenizer = train_tokenizer(vocab_texts, vocab_size=vocab_size, chat_template=template)
    config = tiny_family_config(family, tokenizer, hidden_size=hidden_size, num_layers=num_layers)
    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_config(config)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    return out
