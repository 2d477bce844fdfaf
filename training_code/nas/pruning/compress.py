"""Compression of an exported sub-network: int8 dynamic quantization of its Linear layers.

``torch.ao.quantization.quantize_dynamic`` stores every ``nn.Linear`` weight as int8 (one scale per
tensor) and quantizes activations on the fly, so the encoder's matrix products run in int8 on CPU
(fbgemm / x86 kernels). It is deterministic given the weights, so the export stays an ordinary fp32
Hugging Face folder and records ``"quantization": {"method": "dynamic_int8"}`` in ``nas_export.json``;
the inference handler applies the same call at load time (``inference.quantize_if_requested``; a test
compares the two). Embeddings, LayerNorm and softmax stay fp32. torch 2.13 marks the ``torch.ao``
quantized tensors deprecated in favour of torchao; they still work and need no new package.
"""

from __future__ import annotations

import copy
import warnings

import torch

from .data import Pair, batches

METHODS = ("none", "dynamic_int8")


def quantize_dynamic_int8(model: torch.nn.Module) -> torch.nn.Module:
    """An int8 copy of ``model`` (Linear layers only); ``model`` is left as it is."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch.ao deprecation notices, once per layer
        return torch.ao.quantization.quantize_dynamic(copy.deepcopy(model).eval(), {torch.nn.Linear}, dtype=torch.qint8)


@torch.inference_mode()
def compare_logits(reference, compressed, tokenizer, pairs: list[Pair], max_length: int) -> dict:
    """Error rates of both models and their largest logit difference over ``pairs``."""
    wrong_reference = wrong_compressed = 0
    largest = 0.0
    for batch in batches(pairs, tokenizer, 32, max_length):
        labels = batch.pop("labels")
        a, b = reference(**batch).logits, compressed(**batch).logits
        largest = max(largest, float((a - b).abs().max()))
        wrong_reference += int((a.argmax(-1) != labels).sum())
        wrong_compressed += int((b.argmax(-1) != labels).sum())
    return {
        "validation_error_fp32": wrong_reference / len(pairs),
        "validation_error": wrong_compressed / len(pairs),
        "max_abs_logit_difference": largest,
        "rows": len(pairs),
    }
