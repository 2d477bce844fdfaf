"""Attention over packed rows, one example at a time, so packing costs no attention compute.

With reset position_ids and no attention_mask, transformers masks a packed row with a dense block-diagonal
mask: attention then costs (row length)^2 instead of the sum of each example's length^2, which on CPU or
without flash-attention's varlen kernels undoes what packing saves. `packed_sdpa` splits each row at its
position resets and runs causal SDPA per example instead. It is registered under PACKED_ATTENTION and used
only when packing is on (packed rows end with their padding as one more segment, never attended to by a real
token). A KV cache or a query shorter than its keys falls back to plain SDPA.
"""

from __future__ import annotations

import torch

PACKED_ATTENTION = "qlora_packed_sdpa"


def segments(position_ids: torch.Tensor) -> list[list[tuple[int, int]]]:
    """[start, end) of each example in each row: a new example starts where the position resets to 0."""
    rows = []
    for row in position_ids.tolist():
        starts = [index for index, position in enumerate(row) if position == 0] or [0]
        if starts[0] != 0:
            starts.insert(0, 0)
        rows.append(list(zip(starts, [*starts[1:], len(row)], strict=True)))
    return rows


def packed_sdpa(module, query, key, value, attention_mask, dropout: float = 0.0, scaling=None, **kwargs):
    """query [B, H, L, D], key/value [B, H_kv, L, D] -> ([B, L, H, D], None), as transformers' SDPA returns."""
    from transformers.integrations.sdpa_attention import sdpa_attention_forward

    position_ids = kwargs.get("position_ids")
    if position_ids is None or query.shape[2] != key.shape[2]:
        return sdpa_attention_forward(module, query, key, value, attention_mask, dropout, scaling, **kwargs)
    position_ids = position_ids.expand(query.shape[0], -1)
    gqa = query.shape[1] != key.shape[1]
    rows = []
    for row, spans in enumerate(segments(position_ids)):
        parts = [
            torch.nn.functional.scaled_dot_product_attention(
                query[row : row + 1, :, start:end],
                key[row : row + 1, :, start:end],
                value[row : row + 1, :, start:end],
                dropout_p=dropout,
                is_causal=True,
                scale=scaling,
                enable_gqa=gqa,
            )
            for start, end in spans
        ]
        rows.append(torch.cat(parts, dim=2))
    return torch.cat(rows, dim=0).transpose(1, 2).contiguous(), None


def no_mask(*args, **kwargs) -> None:
    """Packed rows need no mask tensor: packed_sdpa reads the example boundaries from position_ids."""
    return None


def register() -> str:
    from transformers import AttentionInterface
    from transformers.masking_utils import AttentionMaskInterface

    AttentionInterface.register(PACKED_ATTENTION, packed_sdpa)
    AttentionMaskInterface.register(PACKED_ATTENTION, no_mask)
    return PACKED_ATTENTION
