"""Activates a sub-network inside the shared weights of a BERT sequence classifier, by masking.

transformers 5.x dropped BERT's ``head_mask``, so heads are masked here by zeroing their slice of the
attention context right before the output projection (a forward pre-hook on ``attention.output.dense``);
FFN units are masked the same way before ``output.dense``; dropped layers are taken out of the encoder's
``ModuleList`` for the duration of the forward pass. This computes exactly what the physically pruned
model of ``pruning.export`` computes (a block with nothing kept still adds its output bias).
"""

from __future__ import annotations

import contextlib

import torch
from torch import nn

from .search_space import ModelDims, SubnetConfig


def model_dims(config) -> ModelDims:
    return ModelDims(config.num_hidden_layers, config.num_attention_heads, config.intermediate_size)


def encoder_layers(model: nn.Module) -> nn.ModuleList:
    return model.base_model.encoder.layer


class SubnetworkMasks:
    """Hooks installed once on a super-network; ``use(config)`` switches the active sub-network."""

    def __init__(self, model: nn.Module):
        self.model = model
        self.dims = model_dims(model.config)
        self.head_size = model.config.hidden_size // model.config.num_attention_heads
        self.all_layers = encoder_layers(model)
        self._head_masks: list[torch.Tensor | None] = [None] * self.dims.num_layers
        self._unit_masks: list[torch.Tensor | None] = [None] * self.dims.num_layers
        self._handles = []
        for i, layer in enumerate(self.all_layers):
            attention_output, ffn_output = layer.attention.output.dense, layer.output.dense
            self._handles.append(attention_output.register_forward_pre_hook(self._hook(self._head_masks, i)))
            self._handles.append(ffn_output.register_forward_pre_hook(self._hook(self._unit_masks, i)))

    @staticmethod
    def _hook(masks: list, index: int):
        def apply_mask(module, args):
            mask = masks[index]
            if mask is None:
                return None
            return (args[0] * mask.to(args[0].dtype),) + tuple(args[1:])

        return apply_mask

    def _prefix_mask(self, kept: int, total: int, repeat: int) -> torch.Tensor | None:
        if kept == total:
            return None
        device = self.all_layers[0].output.dense.weight.device
        mask = torch.zeros(total * repeat, device=device)
        mask[: kept * repeat] = 1.0
        return mask

    def _clear(self) -> None:
        for i in range(self.dims.num_layers):
            self._head_masks[i] = None
            self._unit_masks[i] = None

    @contextlib.contextmanager
    def scaled(self, head_factors: list[torch.Tensor], unit_factors: list[torch.Tensor]):
        """Within the block, each layer's head contexts and FFN units are multiplied by per-head and per-unit
        factors (gates that autograd can differentiate: ``pruning.importance`` reads their gradients). Factors
        are ``[heads]``/``[units]`` for the whole batch or ``[batch, heads]``/``[batch, units]`` per example."""
        for i in range(self.dims.num_layers):
            heads = head_factors[i].repeat_interleave(self.head_size, dim=-1)
            units = unit_factors[i]
            self._head_masks[i] = heads[:, None, :] if heads.dim() == 2 else heads
            self._unit_masks[i] = units[:, None, :] if units.dim() == 2 else units
        try:
            yield
        finally:
            self._clear()

    @contextlib.contextmanager
    def use(self, config: SubnetConfig | None):
        """Within the block, forward passes run the sub-network ``config`` (None: the full network)."""
        if config is None:
            yield
            return
        config.validate(self.dims)
        for i in range(self.dims.num_layers):
            keep = i < config.num_layers
            heads = config.heads[i] if keep else self.dims.num_heads
            units = config.units[i] if keep else self.dims.intermediate_size
            self._head_masks[i] = self._prefix_mask(heads, self.dims.num_heads, self.head_size)
            self._unit_masks[i] = self._prefix_mask(units, self.dims.intermediate_size, 1)
        encoder = self.model.base_model.encoder
        encoder.layer = nn.ModuleList(list(self.all_layers)[: config.num_layers])
        try:
            yield
        finally:
            encoder.layer = self.all_layers
            self._clear()

    def remove(self) -> None:
        for handle in self._handles:
            handle.remove()
