"""Importance-ordered heads and FFN units ("rewiring", as in DynaBERT) before super-network training.

Sub-networks keep *prefixes* of the heads and units of every layer, so which heads come first decides
what a small sub-network can be. Rewiring permutes each layer's heads and units so the most important
come first. It is a reparametrisation: the full network computes the same function (the permutation
moves whole heads: Q/K/V rows and the output projection's columns; whole units: the FFN input rows and
output columns), only the sub-networks change.

Importance is the first-order Taylor estimate of Michel et al. (2019): for each example the absolute
gradient of its own loss with respect to a gate of 1.0 multiplied into each head's context and each unit's
activation, summed over the labelled batches of the training split (the order, which is all rewiring uses,
is that of the mean). Each example gets its own gates, so one backward pass per batch yields per-example
gradients; the absolute value of a batch-mean gradient would let examples cancel each other out.
"""

from __future__ import annotations

import torch
from torch import nn

from .masks import SubnetworkMasks, encoder_layers


def importance_scores(masks: SubnetworkMasks, batches) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
    """(head scores, unit scores) per layer of ``masks.model``: sum over examples of |dLoss_x/dgate|,
    with one gate of 1.0 per example, head and unit riding on the masks' hooks (outputs unchanged)."""
    model, dims = masks.model, masks.dims
    device = model.device
    head_scores = [torch.zeros(dims.num_heads, device=device) for _ in range(dims.num_layers)]
    unit_scores = [torch.zeros(dims.intermediate_size, device=device) for _ in range(dims.num_layers)]
    was_training = model.training
    model.eval()
    try:
        for batch in batches:
            inputs = {k: v for k, v in batch.items() if k != "labels"}
            size = batch["labels"].shape[0]
            head_gates = [torch.ones(size, dims.num_heads, device=device, requires_grad=True) for _ in head_scores]
            unit_gates = [
                torch.ones(size, dims.intermediate_size, device=device, requires_grad=True) for _ in unit_scores
            ]
            with masks.scaled(head_gates, unit_gates):
                logits = model(**inputs).logits
            # Summed per-example losses: the gradient at example x's gates is dLoss_x/dgate.
            loss = nn.functional.cross_entropy(logits, batch["labels"], reduction="sum")
            gradients = torch.autograd.grad(loss, head_gates + unit_gates)
            for i in range(dims.num_layers):
                head_scores[i] += gradients[i].abs().sum(0)
                unit_scores[i] += gradients[dims.num_layers + i].abs().sum(0)
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
