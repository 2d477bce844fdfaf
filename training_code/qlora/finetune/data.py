"""Training and evaluation examples: read, render, tokenize with completion-only labels, split, pack.

Labels are -100 (ignored) outside the supervised spans of finetune.format, so by default the loss is on the
answers (and their end-of-turn/EOS tokens) only. Packing is best-fit: whole examples go into blocks of at most
the pack length (auto_pack_length, or --pack_length up to max_seq_length), never split; each block carries
its examples' `seq_lengths`, from which TRL's padding-free collator restarts position_ids at every example
(finetune.trainer), so attention stays inside each example. Batching, padding and the Trainer are TRL's.
"""

from __future__ import annotations

import bisect
import random
from dataclasses import dataclass, field
from typing import Any

from .config import TrainConfig
from .format import RenderedRow, render_rows
from .rows import DataError, read_rows

IGNORE_INDEX = -100
TRUNCATION_CHOICES = ("drop", "keep_eos")


@dataclass
class Tokenized:
    input_ids: list[int]
    labels: list[int]
    answer: list[bool] | None = None  # inside a supervised span, also under --train_on_inputs (None: by labels)

    def in_answer(self) -> list[bool]:
        return self.answer if self.answer is not None else [label != IGNORE_INDEX for label in self.labels]


@dataclass
class DataSummary:
    format: str
    rows: int
    examples: int
    tokens: int
    supervised_tokens: int
    truncated_rows: int = 0
    dropped_too_long: int = 0
    dropped_no_supervised_tokens: int = 0


@dataclass
class PreparedData:
    train: list[dict[str, list[int]]]
    eval: list[dict[str, list[int]]]
    summary: dict[str, Any] = field(default_factory=dict)
    eval_rows: list[Tokenized] = field(default_factory=list)  # the eval examples unpacked, for finetune.evaluate


def tokenize_text(text: str, tokenizer: Any) -> list[int]:
    """Token ids with exactly one leading BOS and a trailing EOS, whether or not the text spelled them out."""
    return tokenize_row(RenderedRow(text, [(0, len(text))], True), tokenizer, train_on_inputs=True).input_ids


def _overlaps(start: int, end: int, spans: list[tuple[int, int]]) -> bool:
    """A token [start, end) overlaps a span [low, high); a zero-width token counts as its start character."""
    end = max(end, start + 1)
    return any(start < high and end > low for low, high in spans)


def tokenize_row(row: RenderedRow, tokenizer: Any, train_on_inputs: bool) -> Tokenized:
    """Ids and labels: a token is supervised when any of its characters lies in a supervised span.

    The whole text is tokenized once, so the ids are exactly the text's; a token that straddles the prompt/
    completion boundary (`ĠA` after a prompt ending in a space) is supervised, so no completion token is lost.
    One leading BOS is ensured; rows that need it (text, prompt/completion) end with a supervised EOS. Chat
    rows end as their template ends them (its end-of-turn marks are inside the assistant spans).
    """
    encoded = tokenizer(row.text, add_special_tokens=False, return_offsets_mapping=True)
    ids = list(encoded["input_ids"])
    supervised = [_overlaps(start, end, row.spans) for start, end in encoded["offset_mapping"]]
    bos, eos = tokenizer.bos_token_id, tokenizer.eos_token_id
    if bos is not None and (not ids or ids[0] != bos):
        ids.insert(0, bos)
        supervised.insert(0, False)
    if row.needs_eos and eos is not None and ids[-1] != eos:
        ids.append(eos)
        supervised.append(True)
    labels = (
        list(ids) if train_on_inputs else [i if keep else IGNORE_INDEX for i, keep in zip(ids, supervised, strict=True)]
    )
    return Tokenized(ids, labels, supervised)


def fit_length(example: Tokenized, max_length: int, truncation: str) -> tuple[Tokenized | None, bool]:
    """(the example within max_length or None when it must be dropped, whether an end token was appended).

    `keep_eos`: a cut inside an answer keeps the answer's start and ends it with that answer's own last token
    (the template's end-of-turn token, or the EOS of text and prompt/completion rows), supervised. A cut
    anywhere else (a user turn, the markup between turns) ends the row after the last whole answer before it,
    so the model never learns to stop inside a user message; with no whole answer before it: None.
    """
    if len(example.input_ids) <= max_length:
        return example, False
    if truncation == "drop":
        return None, False
    answer, cut = example.in_answer(), max_length - 1
    if answer[cut]:
        last = cut
        while last + 1 < len(answer) and answer[last + 1]:
            last += 1
        return Tokenized(
            example.input_ids[:cut] + [example.input_ids[last]],
            example.labels[:cut] + [example.labels[last]],
            answer[:cut] + [True],
        ), True
    ends = [index for index in range(cut) if answer[index]]
    if not ends:
        return None, False
    keep = ends[-1] + 1
    return Tokenized(example.input_ids[:keep], example.labels[:keep], answer[:keep]), False


def best_fit_bins(lengths: list[int], capacity: int) -> list[list[int]]:
    """Best-fit decreasing: each item, longest first, goes where it leaves the least room. Returns index lists."""
    order = sorted(range(len(lengths)), key=lambda i: -lengths[i])
    room: list[tuple[int, int]] = []  # (free space, bin number), kept sorted
    bins: list[list[int]] = []
    for index in order:
        slot = bisect.bisect_left(room, (lengths[index], -1))
        if slot == len(room):
            bins.append([index])
            bisect.insort(room, (capacity - lengths[index], len(bins) - 1))
            continue
        free, number = room.pop(slot)
        bins[number].append(index)
        bisect.insort(room, (free - lengths[index], number))
    return bins


def auto_pack_length(lengths: list[int], max_seq_length: int, multiple: int = 64) -> int:
    """The token-weighted mean example length (sum l^2 / sum l), rounded up to `multiple`, at most max_seq_length.

    That is the row length the average token sits in when rows are single examples grouped by length (the
    seed recipe). Packing to it keeps attention cost per token where it was (attention over a packed row
    costs row length per token with a dense block-diagonal mask) while removing the padding; examples longer
    than it keep a row of their own.
    """
    if not lengths:
        return max_seq_length
    weighted = sum(length * length for length in lengths) / sum(lengths)
    return min(max_seq_length, max(multiple, -(-int(weighted) // multiple) * multiple))


def pack(examples: list[Tokenized], block_size: int) -> list[dict[str, list[int]]]:
    """Whole examples in best-fit blocks, in the columns TRL's padding-free collator reads (`seq_lengths`: the
    example lengths, from which it restarts position_ids at each example)."""
    packed = []
    for members in best_fit_bins([len(example.input_ids) for example in examples], block_size):
        block: dict[str, list[int]] = {"input_ids": [], "labels": [], "seq_lengths": []}
        for index in members:
            block["input_ids"] += examples[index].input_ids
            # An example's first token is never predicted from the example before it (TRL's collator masks it
            # too); masked here as well so that the data summary counts the supervised tokens actually trained.
            block["labels"] += [IGNORE_INDEX, *examples[index].labels[1:]]
            block["seq_lengths"].append(len(examples[index].input_ids))
        packed.append(block)
    return packed


def _fit_all(examples: list[Tokenized], config: TrainConfig) -> tuple[list[Tokenized], dict]:
    counts = {"truncated_rows": 0, "dropped_too_long": 0, "dropped_no_supervised_tokens": 0}
    kept = []
    for example in examples:
        too_long = len(example.input_ids) > config.max_seq_length
        fitted, appended = fit_length(example, config.max_seq_length, config.truncation)
        if too_long and config.truncation == "drop":
            counts["dropped_too_long"] += 1
            continue
        # A cut that leaves no answer token would only teach "stop right after the prompt": drop it too.
        learnable = [] if fitted is None else fitted.labels[1:-1] if appended else fitted.labels[1:]
        if all(label == IGNORE_INDEX for label in learnable):
            counts["dropped_no_supervised_tokens"] += 1
            continue
        counts["truncated_rows"] += too_long
        kept.append(fitted)
    return kept, counts


def build_examples(
    kind: str, rows: list[Tokenized], config: TrainConfig, part: str, pack_length: int
) -> tuple[list[dict[str, list[int]]], dict[str, Any], list[Tokenized]]:
    """The (packed) examples, their DataSummary and the kept examples unpacked."""
    kept, counts = _fit_all(rows, config)
    if rows and not kept:
        raise DataError(
            f"{part} data: all {len(rows)} rows were dropped ({counts}); raise --max_seq_length or pass "
            "--truncation keep_eos"
        )
    if config.packing:
        examples = pack(kept, pack_length)
    else:
        examples = [{"input_ids": example.input_ids, "labels": example.labels} for example in kept]
    summary = DataSummary(
        kind,
        len(rows),
        len(examples),
        sum(len(example["input_ids"]) for example in examples),
        sum(label != IGNORE_INDEX for example in examples for label in example["labels"]),
        **counts,
    )
    return examples, summary.__dict__, kept


def _tokenized(role: str, tokenizer: Any, config: TrainConfig, template: str):
    location = config.train_data if role == "train" else config.eval_data
    split, files = (
        (config.train_split, config.train_files) if role == "train" else (config.eval_split, config.eval_files)
    )
    kind, rendered = render_rows(read_rows(location, split, files, role), tokenizer, template)
    return kind, [tokenize_row(row, tokenizer, config.train_on_inputs) for row in rendered]


def split_for_eval(items: list, fraction: float, seed: int, min_rows: int = 1) -> tuple[list, list]:
    """A seeded random hold-out of round(fraction * n) items, at least min_rows; refused when training would
    keep fewer items than the hold-out."""
    if fraction <= 0:
        return items, []
    count = max(min_rows, round(len(items) * fraction))
    if len(items) < 2 * count:
        raise DataError(
            f"{len(items)} distinct training rows are too few to hold out {count} for evaluation (--eval_fraction "
            f"{fraction}, at least --min_eval_rows {min_rows}) and train on more: pass an eval channel or more rows"
        )
    order = list(range(len(items)))
    random.Random(seed).shuffle(order)
    held_out = set(order[:count])
    return [x for i, x in enumerate(items) if i not in held_out], [x for i, x in enumerate(items) if i in held_out]


def _row_key(row: Tokenized) -> tuple:
    return tuple(row.input_ids), tuple(row.labels)


def distinct_split(rows: list[Tokenized], fraction: float, seed: int, min_rows: int) -> tuple[list, list, dict]:
    """(train, eval, counts): the hold-out is drawn from distinct rows, so an exact duplicate is never on both
    sides; eval keeps one copy of each held-out row (the other copies are counted, as
    `held_out_duplicates_dropped`), train keeps every copy of the rest."""
    groups: dict[tuple, list[Tokenized]] = {}
    for row in rows:
        groups.setdefault(_row_key(row), []).append(row)
    train_keys, eval_keys = split_for_eval(list(groups), fraction, seed, min_rows)
    train = [row for key in train_keys for row in groups[key]]
    counts = {
        "source": "split of the training data",
        "distinct_rows": len(groups),
        "duplicate_rows": len(rows) - len(groups),
        "held_out_duplicates_dropped": sum(len(groups[key]) - 1 for key in eval_keys),
        "min_eval_rows": min_rows,
    }
    return train, [groups[key][0] for key in eval_keys], counts


def distinct_eval_rows(train: list[Tokenized], evaluation: list[Tokenized]) -> tuple[list[Tokenized], dict]:
    """The eval channel's rows less exact duplicates and rows that are also training rows (counted)."""
    seen = {_row_key(row) for row in train}
    kept = []
    for row in evaluation:
        if _row_key(row) not in seen:
            seen.add(_row_key(row))
            kept.append(row)
    if not kept:
        raise DataError(f"eval channel: all {len(evaluation)} rows are also training rows (or repeats)")
    return kept, {
        "source": "eval channel",
        "rows_read": len(evaluation),
        "removed_repeats_or_in_train": len(evaluation) - len(kept),
    }


def prepare_data(tokenizer: Any, config: TrainConfig, template: str) -> PreparedData:
    """The examples and their summary, whose counts account for every row read: `rows_read` is train.rows +
    eval.rows + eval.held_out_duplicates_dropped (a split) or eval.removed_repeats_or_in_train (an eval channel).
    template: the chat template that renders chats (finetune.templates.resolve_chat_template)."""
    kind, train_rows = _tokenized("train", tokenizer, config, template)
    rows_read = len(train_rows)
    if config.eval_data:
        eval_kind, eval_rows = _tokenized("eval", tokenizer, config, template)
        rows_read += len(eval_rows)
        eval_rows, eval_source = distinct_eval_rows(train_rows, eval_rows)
    else:
        eval_kind = kind
        train_rows, eval_rows, eval_source = distinct_split(
            train_rows, config.eval_fraction, config.seed, config.min_eval_rows
        )
    pack_length = config.pack_tokens or auto_pack_length(
        [min(len(row.input_ids), config.max_seq_length) for row in train_rows], config.max_seq_length
    )
    train, train_summary, _ = build_examples(kind, train_rows, config, "training", pack_length)
    evaluation, eval_summary, eval_kept = build_examples(eval_kind, eval_rows, config, "evaluation", pack_length)
    summary = {
        "rows_read": rows_read,
        "train": train_summary,
        "eval": {**eval_summary, **(eval_source if eval_rows else {"source": None})},
        "packing": config.packing,
        "pack_length": pack_length if config.packing else None,
        "max_seq_length": config.max_seq_length,
        "train_on_inputs": config.train_on_inputs,
        "truncation": config.truncation,
    }
    return PreparedData(train, evaluation, summary, eval_kept)
