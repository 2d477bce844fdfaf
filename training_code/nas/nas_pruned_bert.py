"""BERT sequence classifier whose layers keep their own number of heads and FFN units.

transformers 5.x has neither ``prune_heads`` nor per-layer sizes in ``BertConfig`` (its head size is
``hidden_size / num_attention_heads``), so a model with, say, 4 heads of the original head size cannot be
described by a plain ``BertConfig``. This class reads two extra config entries,
``layer_num_heads`` and ``layer_intermediate_sizes``, and shrinks the layers' Linear modules to match.

``save_pretrained`` copies this file next to the weights (``auto_map``), so the exported model loads with
``AutoModelForSequenceClassification.from_pretrained(path, trust_remote_code=True)`` and nothing else.
This file must import only torch and transformers.
"""

from __future__ import annotations

import torch
from torch import nn
from transformers import BertForSequenceClassification


class EmptySelfAttention(nn.Module):
    """Self-attention with no heads: an empty context, so the output projection yields its bias only."""

    def forward(self, hidden_states: torch.Tensor, *args, **kwargs):
        return hidden_states.new_zeros(*hidden_states.shape[:-1], 0), None


def shrink_layer(layer: nn.Module, num_heads: int, num_units: int, hidden_size: int, head_size: int) -> None:
    """Replaces a BertLayer's Q/K/V/O and FFN Linear modules by ones with fewer heads and units."""
    inner = num_heads * head_size
    attention = layer.attention
    if num_heads == 0:
        attention.self = EmptySelfAttention()
    else:
        attention.self.query = nn.Linear(hidden_size, inner)
        attention.self.key = nn.Linear(hidden_size, inner)
        attention.self.value = nn.Linear(hidden_size, inner)
        attention.self.num_attention_heads = num_heads
        attention.self.all_head_size = inner
    attention.output.dense = nn.Linear(inner, hidden_size)
    layer.intermediate.dense = nn.Linear(hidden_size, num_units)
    layer.output.dense = nn.Linear(num_units, hidden_size)


class PrunedBertForSequenceClassification(BertForSequenceClassification):
    """``BertForSequenceClassification`` with per-layer head and FFN-unit counts from the config."""

    def __init__(self, config):
        super().__init__(config)
        heads = list(config.layer_num_heads)
        units = list(config.layer_intermediate_sizes)
        if len(heads) != config.num_hidden_layers or len(units) != config.num_hidden_layers:
            raise ValueError("layer_num_heads and layer_intermediate_sizes need one entry per hidden layer")
        head_size = config.hidden_size // config.num_attention_heads
        for layer, num_heads, num_units in zip(self.bert.encoder.layer, heads, units, strict=True):
            shrink_layer(layer, num_heads, num_units, config.hidden_size, head_size)
