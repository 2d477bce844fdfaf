"""Exact parameter count and multiply-accumulate count (MACs) of a sub-network (standard library only).

The count is what ``sum(p.numel())`` gives on the physically pruned model of ``pruning.export``. The seed's
formula counted the attention output projection as if it kept all ``hidden`` inputs; here a layer with h
heads of size d has an output projection of ``h*d*hidden`` weights plus its ``hidden`` bias (the bias
stays even with 0 heads, as does the FFN output bias with 0 units).
"""

from __future__ import annotations

from dataclasses import dataclass

from .search_space import SubnetConfig


@dataclass(frozen=True)
class EncoderShape:
    """The fixed dimensions of a BERT-style sequence classifier (from its ``config.json``)."""

    vocab_size: int
    hidden_size: int
    num_heads: int
    max_position_embeddings: int
    type_vocab_size: int
    num_labels: int

    @property
    def head_size(self) -> int:
        return self.hidden_size // self.num_heads

    @classmethod
    def from_config(cls, config) -> EncoderShape:
        """Accepts a ``transformers`` config object or its ``config.json`` dict."""
        if isinstance(config, dict):
            get = config.get
        else:

            def get(key, default=None):
                return getattr(config, key, default)

        num_labels = get("num_labels") or len(get("id2label") or {}) or 2
        return cls(
            vocab_size=get("vocab_size"),
            hidden_size=get("hidden_size"),
            num_heads=get("num_attention_heads"),
            max_position_embeddings=get("max_position_embeddings"),
            type_vocab_size=get("type_vocab_size"),
            num_labels=num_labels,
        )


def layer_parameters(shape: EncoderShape, num_heads: int, num_units: int) -> int:
    hidden, inner = shape.hidden_size, num_heads * shape.head_size
    attention = 3 * (hidden * inner + inner) + inner * hidden + hidden + 2 * hidden
    feed_forward = hidden * num_units + num_units + num_units * hidden + hidden + 2 * hidden
    return attention + feed_forward


def count_parameters(shape: EncoderShape, config: SubnetConfig) -> int:
    hidden = shape.hidden_size
    positions_and_types = shape.max_position_embeddings + shape.type_vocab_size
    embeddings = (shape.vocab_size + positions_and_types) * hidden + 2 * hidden
    layers = sum(layer_parameters(shape, h, u) for h, u in zip(config.heads, config.units, strict=True))
    pooler = hidden * hidden + hidden
    classifier = hidden * shape.num_labels + shape.num_labels
    return embeddings + layers + pooler + classifier


def layer_macs(shape: EncoderShape, num_heads: int, num_units: int, tokens: int) -> int:
    """Multiply-accumulates of one encoder layer on one sequence of ``tokens`` tokens: Q/K/V and output
    projections, attention scores and the weighted sum over values, the two FFN matrices."""
    hidden, inner = shape.hidden_size, num_heads * shape.head_size
    projections = 4 * tokens * hidden * inner
    attention = 2 * tokens * tokens * inner
    feed_forward = 2 * tokens * hidden * num_units
    return projections + attention + feed_forward


def count_macs(shape: EncoderShape, config: SubnetConfig, tokens: int) -> int:
    """MACs of one forward pass on one sequence: a deterministic latency proxy (the ``macs`` objective),
    unlike wall time on a shared machine. Embedding lookups, LayerNorm, softmax and activations are not
    matrix products and are left out; the pooler and classifier act on the [CLS] token only."""
    layers = sum(layer_macs(shape, h, u, tokens) for h, u in zip(config.heads, config.units, strict=True))
    return layers + shape.hidden_size * shape.hidden_size + shape.hidden_size * shape.num_labels


def tokens_for_macs(shape: EncoderShape, config: SubnetConfig, macs: float) -> int | None:
    """The sequence length at which ``config`` has ``macs`` MACs (nearest; None for a network whose MACs do
    not depend on it). Trials log MACs as a SageMaker metric, a 32-bit float: this recovers the length
    they were counted at, from which the exact counts (and the unpruned network's) follow."""
    if count_macs(shape, config, 1) == count_macs(shape, config, 2):
        return None
    low, high = 1, shape.max_position_embeddings
    while low < high:  # MACs grow with the length: the first length reaching ``macs``
        middle = (low + high) // 2
        if count_macs(shape, config, middle) < macs:
            low = middle + 1
        else:
            high = middle
    candidates = [n for n in (low - 1, low) if n >= 1]
    return min(candidates, key=lambda n: abs(count_macs(shape, config, n) - macs))
