"""Importance-ordered heads and FFN units ("rewiring", as in DynaBERT) before super-network training.

Sub-networks keep *prefixes* of the heads and units of every layer, so which heads come first decides
what a small sub-network can be. Rewiring permutes each layer's heads and units so the most important
come first. It is a reparametrisation: the full network computes the same function (the permutation
moves whole heads: Q/K/V rows and the output projection's columns; whole units: the FFN input rows and
output columns), only the sub-networks change.

Importance is the first-order Taylor estimate of Michel et al. (2019): the mean absolute gradient of the
loss with respect to a gate of 1.0 multiplied into each head's context and each unit's activation, over
labelled batches of the training split.
"""

from __future__ import annotations

import torch
from nas_masks import SubnetworkMasks, encoder_layers
from torch import nn


def importance_scores(masks: SubnetworkMasks, batches) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
    """(head scores, unit scores) per layer of ``masks.model``, from |dLoss/dgate| summed over ``batches``
    (with labels); the gates ride on the masks' hooks, scaled by 1.0, so the outputs are unchanged."""
    model, dims = masks.model, masks.dims
    device = model.device
    head_gates = [torch.ones(dims.num_heads, device=device, requires_grad=True) for _ in range(dims.num_layers)]
    unit_gates = [torch.ones(dims.intermediate_size, device=device, requires_grad=True) for _ in range(dims.num_layers)]
    head_scores = [torch.zeros(dims.num_heads, device=device) for _ in range(dims.num_layers)]
    unit_scores = [torch.zeros(dims.intermediate_size, device=device) for _ in range(dims.num_layers)]
    was_training = model.training
    model.eval()
    try:
        for batch in batches:
            inputs = {k: v for k, v in batch.items() if k != "labels"}
            with masks.scaled(head_gates, unit_gates):
                loss = nn.functional.cross_entropy(model(**inputs).logits, batch["labels"])
            gradients = torch.autograd.grad(loss, head_gates + unit_gates)
            for i in range(dims.num_layers):
                head_scores[i] += gradients[i].abs()
                unit_scores[i] += gradients[dims.num_layers + i].abs()
    finally:
        model.train(was_training)
    return head_scores, unit_scores


def _permute_rows(linear: nn.Linear, order: torch.Tensor) -> None:
    linear.weight.data = linear.weight.data[order].contiguous()
    if linear.bias is not None:
        linear.bias.data = linear.bias.data[order].contiguous()


def _permute_columns(linear: nn.Linear, order: torch.Tensor) -> None:
    linear.weight.data = linear.weight.data[:, order].contiguous()


@torch.no_grad()
def rewire(model: nn.Module, head_scores: list[torch.Tensor], unit_scores: list[torch.Tensor]) -> list[dict]:
    """Permutes every layer's heads and units into descending importance; returns the orders applied."""
    head_size = model.config.hidden_size // model.config.num_attention_heads
    applied = []
    for layer, heads, units in zip(encoder_layers(model), head_scores, unit_scores, strict=True):
        head_order = torch.argsort(heads, descending=True, stable=True)
        rows = (head_order[:, None] * head_size + torch.arange(head_size, device=head_order.device)).reshape(-1)
        attention = layer.attention
        for projection in (attention.self.query, attention.self.key, attention.self.value):
            _permute_rows(projection, rows)
        _permute_columns(attention.output.dense, rows)
        unit_order = torch.argsort(units, descending=True, stable=True)
        _permute_rows(layer.intermediate.dense, unit_order)
        _permute_columns(layer.output.dense, unit_order)
        applied.append({"heads": head_order.tolist(), "units": unit_order.tolist()})
    return applied
