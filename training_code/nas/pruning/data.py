"""Sentence-pair data: the shipped JSONL files (local runs, tests) or GLUE RTE (cloud), and batching.

Labels follow GLUE RTE: 0 = entailment, 1 = not_entailment. The train split is cut into train/validation
with a fixed seed (70/30 by default); the test split is kept apart for re-scoring the Pareto set.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass
from pathlib import Path

LABELS = ("entailment", "not_entailment")
DATASETS = ("jsonl", "glue_rte")


@dataclass(frozen=True)
class Pair:
    sentence1: str
    sentence2: str
    label: int


class DatasetFormatError(ValueError):
    """A malformed row; the message names the file and the 1-based row number."""


def _parse_label(value, where: str) -> int:
    if isinstance(value, bool):
        raise DatasetFormatError(f"{where}: label must be one of {LABELS} or 0/1, got {value!r}")
    if isinstance(value, int) and value in (0, 1):
        return value
    if isinstance(value, str) and value in LABELS:
        return LABELS.index(value)
    raise DatasetFormatError(f"{where}: label must be one of {LABELS} or 0/1, got {value!r}")


def parse_row(row, where: str) -> Pair:
    if not isinstance(row, dict):
        raise DatasetFormatError(f"{where}: expected a JSON object, got {type(row).__name__}")
    for key in ("sentence1", "sentence2"):
        if not isinstance(row.get(key), str) or not row[key].strip():
            raise DatasetFormatError(f"{where}: {key!r} must be a non-empty string")
    if "label" not in row:
        raise DatasetFormatError(f"{where}: missing 'label'")
    return Pair(row["sentence1"], row["sentence2"], _parse_label(row["label"], where))


def read_pairs_jsonl(path: str | Path) -> list[Pair]:
    """Reads ``{"sentence1", "sentence2", "label"}`` rows; blank lines are skipped, anything else fails."""
    pairs = []
    with open(path, encoding="utf-8") as handle:
        for number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            where = f"{path}: row {number}"
            try:
                row = json.loads(line)
            except json.JSONDecodeError as error:
                raise DatasetFormatError(f"{where}: invalid JSON ({error.msg})") from error
            pairs.append(parse_row(row, where))
    if not pairs:
        raise DatasetFormatError(f"{path}: no rows")
    return pairs


def split_train_validation(pairs: list[Pair], validation_fraction: float, seed: int) -> tuple[list, list]:
    order = list(range(len(pairs)))
    random.Random(seed).shuffle(order)
    num_validation = round(len(pairs) * validation_fraction)
    validation = [pairs[i] for i in order[:num_validation]]
    train = [pairs[i] for i in order[num_validation:]]
    return train, validation


def _load_glue_rte() -> tuple[list[Pair], list[Pair]]:
    from datasets import load_dataset

    rte = load_dataset("nyu-mll/glue", "rte")

    def convert(split):
        return [Pair(r["sentence1"], r["sentence2"], int(r["label"])) for r in split]

    return convert(rte["train"]), convert(rte["validation"])


def load_splits(
    dataset: str, data_dir: str | Path | None, validation_fraction: float = 0.3, seed: int = 42
) -> dict[str, list[Pair]]:
    """``train``/``validation``/``test`` splits. ``jsonl`` reads ``train.jsonl`` and ``test.jsonl``."""
    if dataset == "jsonl":
        data_dir = Path(data_dir)
        full_train = read_pairs_jsonl(data_dir / "train.jsonl")
        test = read_pairs_jsonl(data_dir / "test.jsonl")
    elif dataset == "glue_rte":
        full_train, test = _load_glue_rte()
    else:
        raise ValueError(f"unknown dataset {dataset!r}; expected one of {DATASETS}")
    train, validation = split_train_validation(full_train, validation_fraction, seed)
    return {"train": train, "validation": validation, "test": test}


def tokenize_pairs(tokenizer, first: list[str], second: list[str], max_length: int):
    """The one tokenization used by training, evaluation and serving (the handler mirrors it)."""
    return tokenizer(
        first,
        second,
        truncation=True,
        max_length=max_length,
        padding=True,
        return_tensors="pt",
        return_token_type_ids=True,
        return_attention_mask=True,
    )


def batches(pairs: list[Pair], tokenizer, batch_size: int, max_length: int, shuffle_seed: int | None = None):
    """Yields tokenized batches with ``labels``; padding is per batch, up to ``max_length``."""
    import torch

    order = list(range(len(pairs)))
    if shuffle_seed is not None:
        random.Random(shuffle_seed).shuffle(order)
    for start in range(0, len(order), batch_size):
        chunk = [pairs[i] for i in order[start : start + batch_size]]
        first, second = [p.sentence1 for p in chunk], [p.sentence2 for p in chunk]
        encoded = tokenize_pairs(tokenizer, first, second, max_length)
        encoded["labels"] = torch.tensor([p.label for p in chunk])
        yield encoded
