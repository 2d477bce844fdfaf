"""Training and evaluation examples: read, render, tokenize, split, optionally pack, and collate.

Packing concatenates examples into blocks of exactly max_seq_length tokens, so no step is spent on padding.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any

import torch
from qlora_format import render_rows
from qlora_rows import DataError, read_rows

IGNORE_INDEX = -100


@dataclass
class DataSummary:
    format: str
    rows: int
    examples: int
    tokens: int
    truncated_rows: int = 0
    dropped_tail_tokens: int = 0


@dataclass
class PreparedData:
    train: list[dict[str, list[int]]]
    eval: list[dict[str, list[int]]]
    summary: dict[str, Any] = field(default_factory=dict)


def tokenize_text(text: str, tokenizer: Any) -> list[int]:
    """Token ids with exactly one leading BOS and a trailing EOS, whether or not the text spelled them out."""
    ids = list(tokenizer(text, add_special_tokens=False)["input_ids"])
    bos, eos = tokenizer.bos_token_id, tokenizer.eos_token_id
    if bos is not None and (not ids or ids[0] != bos):
        ids.insert(0, bos)
    if eos is not None and ids[-1] != eos:
        ids.append(eos)
    return ids


def pack(sequences: list[list[int]], block_size: int) -> tuple[list[list[int]], int]:
    """Blocks of block_size tokens from the concatenated sequences, and how many tail tokens were dropped.

    A corpus shorter than one block becomes one short block rather than nothing.
    """
    stream = [token for sequence in sequences for token in sequence]
    full = len(stream) // block_size
    if full == 0:
        return [stream], 0
    return [stream[i * block_size : (i + 1) * block_size] for i in range(full)], len(
        stream
    ) - full * block_size


def _to_examples(sequences: list[list[int]], max_seq_length: int, packing: bool) -> tuple[list, int, int]:
    if packing:
        blocks, dropped = pack(sequences, max_seq_length)
        return [{"input_ids": block} for block in blocks], 0, dropped
    truncated = sum(len(sequence) > max_seq_length for sequence in sequences)
    return [{"input_ids": sequence[:max_seq_length]} for sequence in sequences], truncated, 0


def _tokenized(location: str, tokenizer: Any) -> tuple[str, list[list[int]]]:
    kind, texts = render_rows(read_rows(location), tokenizer)
    return kind, [tokenize_text(text, tokenizer) for text in texts]


def split_for_eval(items: list, fraction: float, seed: int) -> tuple[list, list]:
    """A seeded random hold-out of round(fraction * n) items (at least one when fraction > 0)."""
    if fraction <= 0:
        return items, []
    count = max(1, round(len(items) * fraction))
    if count >= len(items):
        raise DataError(f"--eval_fraction {fraction} leaves no training rows out of {len(items)}")
    order = list(range(len(items)))
    random.Random(seed).shuffle(order)
    held_out = set(order[:count])
    return [x for i, x in enumerate(items) if i not in held_out], [
        x for i, x in enumerate(items) if i in held_out
    ]


def prepare_data(
    tokenizer: Any,
    train_data: str,
    eval_data: str | None,
    eval_fraction: float,
    max_seq_length: int,
    packing: bool,
    seed: int,
) -> PreparedData:
    kind, train_sequences = _tokenized(train_data, tokenizer)
    if eval_data:
        eval_kind, eval_sequences = _tokenized(eval_data, tokenizer)
    else:
        eval_kind = kind
        train_sequences, eval_sequences = split_for_eval(train_sequences, eval_fraction, seed)
    train, truncated, dropped = _to_examples(train_sequences, max_seq_length, packing)
    evaluation, eval_truncated, eval_dropped = (
        _to_examples(eval_sequences, max_seq_length, packing) if eval_sequences else ([], 0, 0)
    )
    summary = {
        "train": DataSummary(
            kind,
            len(train_sequences),
            len(train),
            sum(len(x["input_ids"]) for x in train),
            truncated,
            dropped,
        ).__dict__,
        "eval": DataSummary(
            eval_kind,
            len(eval_sequences),
            len(evaluation),
            sum(len(x["input_ids"]) for x in evaluation),
            eval_truncated,
            eval_dropped,
        ).__dict__,
        "packing": packing,
        "max_seq_length": max_seq_length,
    }
    return PreparedData(train, evaluation, summary)


class ExampleDataset(torch.utils.data.Dataset):
    """A list of tokenized examples; exposes lengths for length-grouped sampling."""

    def __init__(self, examples: list[dict[str, list[int]]]):
        self.examples = examples

    def __len__(self) -> int:
        return len(self.examples)

    def __getitem__(self, index: int) -> dict[str, list[int]]:
        return self.examples[index]

    @property
    def lengths(self) -> list[int]:
        return [len(example["input_ids"]) for example in self.examples]


@dataclass
class CausalLMCollator:
    """Right-pads a batch; labels copy input_ids minus padding (pad may equal EOS, so mask by length)."""

    pad_token_id: int
    pad_to_multiple_of: int | None = None

    def __call__(self, features: list[dict[str, list[int]]]) -> dict[str, torch.Tensor]:
        longest = max(len(feature["input_ids"]) for feature in features)
        if self.pad_to_multiple_of:
            longest = -(-longest // self.pad_to_multiple_of) * self.pad_to_multiple_of
        input_ids = torch.full((len(features), longest), self.pad_token_id, dtype=torch.long)
        attention_mask = torch.zeros((len(features), longest), dtype=torch.long)
        for row, feature in enumerate(features):
            ids = torch.tensor(feature["input_ids"], dtype=torch.long)
            input_ids[row, : len(ids)] = ids
            attention_mask[row, : len(ids)] = 1
        labels = input_ids.masked_fill(attention_mask == 0, IGNORE_INDEX)
        return {"input_ids": input_ids, "attention_mask": attention_mask, "labels": labels}
