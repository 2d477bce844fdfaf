"""BERT sequence classifier whose layers keep their own number of heads and FFN units, and whose head may
read the mean of the token vectors instead of [CLS].

transformers 5.x has neither ``prune_heads`` nor per-layer sizes in ``BertConfig`` (its head size is
``hidden_size / num_attention_heads``), so a model with, say, 4 heads of the original head size cannot be
described by a plain ``BertConfig``. This class reads two optional config entries,
``layer_num_heads`` and ``layer_intermediate_sizes``, and shrinks the layers' Linear modules to match.

``classifier_pooling: "mean"`` (config) makes the head pool the last hidden states over the attention
mask (padding excluded, so a pair scores the same alone or in a padded batch) and pass that through the
pooler's dense + tanh and the classifier. MiniLM-L6 (sentence-transformers) was trained with mean pooling:
its [CLS] vector barely depends on the input, and a [CLS] head on the shipped pairs stays at chance
(``bench/README-nas.md``). The parameters are BERT's own, so counts and pruning are unchanged.

``save_pretrained`` copies this file next to the weights (``auto_map``), so the exported model loads with
``AutoModelForSequenceClassification.from_pretrained(path, trust_remote_code=True)`` and nothing else.
This file must import only torch and transformers.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn
from transformers import BertForSequenceClassification
from transformers.modeling_outputs import SequenceClassifierOutput

POOLINGS = ("cls", "mean")


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


def masked_mean(hidden: torch.Tensor, attention_mask: torch.Tensor | None) -> torch.Tensor:
    """Mean of the token vectors that the attention mask keeps (all tokens without a mask)."""
    if attention_mask is None:
        return hidden.mean(dim=1)
    mask = attention_mask.unsqueeze(-1).to(hidden.dtype)
    return (hidden * mask).sum(dim=1) / mask.sum(dim=1).clamp(min=1.0)


class PrunedBertForSequenceClassification(BertForSequenceClassification):
    """``BertForSequenceClassification`` with per-layer head and FFN-unit counts and the pooling from the
    config (``layer_num_heads``, ``layer_intermediate_sizes``, ``classifier_pooling``; all optional)."""

    def __init__(self, config):
        super().__init__(config)
        pooling = getattr(config, "classifier_pooling", "cls")
        if pooling not in POOLINGS:
            raise ValueError(f"classifier_pooling must be one of {POOLINGS}, got {pooling!r}")
        heads = getattr(config, "layer_num_heads", None)
        units = getattr(config, "layer_intermediate_sizes", None)
        if heads is None and units is None:
            return
        heads, units = list(heads or []), list(units or [])
        if len(heads) != config.num_hidden_layers or len(units) != config.num_hidden_layers:
            raise ValueError("layer_num_heads and layer_intermediate_sizes need one entry per hidden layer")
        head_size = config.hidden_size // config.num_attention_heads
        for layer, num_heads, num_units in zip(self.bert.encoder.layer, heads, units, strict=True):
            shrink_layer(layer, num_heads, num_units, config.hidden_size, head_size)

    def forward(self, input_ids=None, attention_mask=None, token_type_ids=None, labels=None, **kwargs):
        if getattr(self.config, "classifier_pooling", "cls") == "cls":
            return super().forward(
                input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids, labels=labels,
                **kwargs,
            )  # fmt: skip
        outputs = self.bert(input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids, **kwargs)
        pooler = self.bert.pooler
        pooled = pooler.activation(pooler.dense(masked_mean(outputs.last_hidden_state, attention_mask)))
        logits = self.classifier(self.dropout(pooled))
        loss = None if labels is None else F.cross_entropy(logits.view(-1, self.num_labels), labels.view(-1))
        return SequenceClassifierOutput(loss=loss, logits=logits)
