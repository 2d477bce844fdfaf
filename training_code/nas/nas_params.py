"""Exact parameter count of a sub-network (standard library only).

The count is what ``sum(p.numel())`` gives on the physically pruned model of ``nas_export``. The seed's
formula counted the attention output projection as if it kept all ``hidden`` inputs; here a layer with h
heads of size d has an output projection of ``h*d*hidden`` weights plus its ``hidden`` bias (the bias
stays even with 0 heads, as does the FFN output bias with 0 units).
"""

from __future__ import annotations

from dataclasses import dataclass

from nas_search_space import SubnetConfig


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
