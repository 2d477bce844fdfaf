"""Label masks checked against expectations built from the chat templates piece by piece.

Every expected mask here comes from rendering the conversation (or concatenating the strings) and tokenizing
each piece on its own, or from decoding token prefixes: never from the offsets finetune.data computes.
"""

from __future__ import annotations

import json

import pytest
from finetune.data import IGNORE_INDEX, prepare_data, tokenize_row
from finetune.format import render_rows
from finetune.rows import DataError, read_rows
from finetune.templates import LLAMA2_CHAT_TEMPLATE
from qlora_chat_tokenizers import FAMILIES, GEMMA, family_tokenizer
from qlora_test_helpers import data_config, vocab_texts, write_jsonl

SHARD_PROMPT = "Q: What is a shard?\nA: "
SHARD_COMPLETION = "A shard is a piece."
FEW_SHOT = [
    {"role": "user", "content": "explain llama"},
    {"role": "assistant", "content": "a model that learns"},
    {"role": "user", "content": "why adapter"},
]
ANSWER = {"role": "assistant", "content": "it trains few weights"}
LONG_USER = "explain " + " ".join(["alpha beta gamma delta"] * 12)


def _tokenizer(family, eos: str | None = None):
    texts = vocab_texts() + [SHARD_PROMPT + SHARD_COMPLETION] * 8 + [m["content"] for m in [*FEW_SHOT, ANSWER]]
    tokenizer = family_tokenizer(family, texts)
    if eos:  # a base model's tokenizer: its EOS is not the template's end-of-turn token
        tokenizer.add_special_tokens({"eos_token": eos})
    return tokenizer


def _ids(tokenizer, text: str) -> list[int]:
    return tokenizer(text, add_special_tokens=False)["input_ids"]


def _render(tokenizer, messages, generation_prompt=False) -> str:
    return tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=generation_prompt)


def _labelled(tmp_path, tokenizer, rows):
    path = write_jsonl(tmp_path / "train.jsonl", rows)
    _, rendered = render_rows(read_rows(path), tokenizer, tokenizer.chat_template)
    return [tokenize_row(row, tokenizer, train_on_inputs=False) for row in rendered]


def _expected_from_pieces(tokenizer, pieces: list[tuple[str, bool]]) -> tuple[list[int], list[int]]:
    """(ids, labels) from tokenizing each (text, supervised) piece on its own."""
    ids, labels = [], []
    for text, supervised in pieces:
        piece = _ids(tokenizer, text)
        ids += piece
        labels += piece if supervised else [IGNORE_INDEX] * len(piece)
    return ids, labels


def _chat_pieces(tokenizer, messages, answer_end: str, first_supervised: int = 0) -> list[tuple[str, bool]]:
    """The rendered chat cut into pieces: each supervised answer is its content plus the end-of-turn token."""
    full = _render(tokenizer, messages)
    pieces, position = [], 0
    for index, message in enumerate(messages):
        if message["role"] != "assistant" or index < first_supervised:
            continue
        start = len(_render(tokenizer, messages[:index], generation_prompt=True))
        answer = message["content"] + answer_end
        assert full[start : start + len(answer)] == answer
        pieces += [(full[position:start], False), (answer, True)]
        position = start + len(answer)
    return [piece for piece in [*pieces, (full[position:], False)] if piece[0]]


@pytest.mark.parametrize("name", ["llama3", "chatml"])
def test_a_completion_token_straddling_the_prompt_boundary_is_supervised(tmp_path, name):
    tokenizer = _tokenizer(FAMILIES[name])
    full = SHARD_PROMPT + SHARD_COMPLETION
    ids = _ids(tokenizer, full)
    ends = [len(tokenizer.decode(ids[: k + 1])) for k in range(len(ids))]  # character extents by decoding
    starts = [0, *ends[:-1]]
    assert any(start < len(SHARD_PROMPT) < end for start, end in zip(starts, ends, strict=True))  # " A" straddles
    [example] = _labelled(tmp_path, tokenizer, [{"prompt": SHARD_PROMPT, "completion": SHARD_COMPLETION}])
    overlapping = [i if end > len(SHARD_PROMPT) else IGNORE_INDEX for i, end in zip(ids, ends, strict=True)]
    bos = [IGNORE_INDEX] if tokenizer.bos_token_id is not None else []
    assert example.labels == [*bos, *overlapping, tokenizer.eos_token_id]
    supervised = [i for i in example.labels if i != IGNORE_INDEX]
    assert tokenizer.decode(supervised) == " " + SHARD_COMPLETION + tokenizer.eos_token  # no completion token lost


@pytest.mark.parametrize("name", sorted(FAMILIES))
def test_a_message_list_prompt_trains_only_the_completion(tmp_path, name):
    family = FAMILIES[name]
    tokenizer = _tokenizer(family)
    [example] = _labelled(tmp_path, tokenizer, [{"prompt": FEW_SHOT, "completion": [ANSWER]}])
    ids, labels = _expected_from_pieces(
        tokenizer, _chat_pieces(tokenizer, [*FEW_SHOT, ANSWER], family.answer_end, first_supervised=len(FEW_SHOT))
    )
    assert example.input_ids == ids and example.labels == labels
    assert tokenizer.decode([i for i in labels if i != IGNORE_INDEX]) == ANSWER["content"] + family.answer_end


@pytest.mark.parametrize("family", [FAMILIES["chatml"], GEMMA], ids=lambda family: family.name)
def test_supervision_ends_at_the_end_of_turn_token_not_the_newline_after_it(tmp_path, family):
    tokenizer = _tokenizer(family)
    chat = [*FEW_SHOT, ANSWER]
    [example] = _labelled(tmp_path, tokenizer, [{"messages": chat}])
    pieces = _chat_pieces(tokenizer, chat, family.answer_end)
    assert pieces[-1] == ("\n", False)  # the template closes the last turn with a newline, never learned
    assert (example.input_ids, example.labels) == _expected_from_pieces(tokenizer, pieces)


def _keep_eos(tmp_path, tokenizer, rows, max_seq_length):
    path = write_jsonl(tmp_path / "train.jsonl", rows)
    config = data_config(path, max_seq_length=max_seq_length, packing=False, truncation="keep_eos", seed=0)
    return prepare_data(tokenizer, config, tokenizer.chat_template)


@pytest.mark.parametrize("name", ["llama3", "chatml"])
def test_keep_eos_never_ends_a_row_inside_a_user_turn(tmp_path, name):
    family = FAMILIES[name]
    tokenizer = _tokenizer(family, eos="<|endoftext|>")
    chat = [*FEW_SHOT[:2], {"role": "user", "content": LONG_USER}, ANSWER]
    first_turn = _render(tokenizer, chat[:2]).rstrip()  # through the first answer's end-of-turn token
    pieces = [piece for piece in _chat_pieces(tokenizer, chat[:2], family.answer_end) if piece[0].strip()]
    ids, labels = _expected_from_pieces(tokenizer, pieces)
    assert _ids(tokenizer, first_turn) == ids
    prepared = _keep_eos(tmp_path, tokenizer, [{"messages": chat}], max_seq_length=len(ids) + 6)
    assert prepared.train == [{"input_ids": ids, "labels": labels}]  # ends before the cut user turn
    assert prepared.summary["train"]["truncated_rows"] == 1


@pytest.mark.parametrize("name", ["llama3", "chatml"])
def test_keep_eos_ends_a_cut_answer_with_the_templates_end_of_turn_token(tmp_path, name):
    family = FAMILIES[name]
    tokenizer = _tokenizer(family, eos="<|endoftext|>")
    chat = [FEW_SHOT[0], {"role": "assistant", "content": LONG_USER}]
    prompt = _render(tokenizer, chat[:1], generation_prompt=True)
    full = _ids(tokenizer, _render(tokenizer, chat))
    length = len(_ids(tokenizer, prompt)) + 5
    end_of_turn = tokenizer.convert_tokens_to_ids(family.answer_end)
    assert end_of_turn != tokenizer.eos_token_id
    prepared = _keep_eos(tmp_path, tokenizer, [{"messages": chat}], max_seq_length=length)
    [example] = prepared.train
    assert example["input_ids"] == [*full[: length - 1], end_of_turn]
    assert example["labels"] == [IGNORE_INDEX] * (length - 5) + [*full[length - 5 : length - 1], end_of_turn]
    # A cut inside the first user turn leaves nothing to learn: the row is dropped and counted.
    rows = [{"messages": [{"role": "user", "content": LONG_USER}, ANSWER]}, {"messages": chat}]
    dropped = _keep_eos(tmp_path, tokenizer, rows, max_seq_length=length)
    assert dropped.summary["train"]["dropped_no_supervised_tokens"] == 1 and len(dropped.train) == 1


def test_exact_duplicate_rows_never_land_in_both_train_and_eval(tmp_path, tokenizer):
    rows = [{"instruction": f"explain item {i}", "response": f"item {i} is a thing"} for i in range(51)]
    rows += rows[:9]  # 60 rows, 9 of them exact duplicates
    lines = [json.dumps(row) for row in rows]
    path = tmp_path / "train.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    for seed in range(6):
        config = data_config(path, packing=False, eval_fraction=0.2, seed=seed)
        prepared = prepare_data(tokenizer, config, LLAMA2_CHAT_TEMPLATE)
        train = [tuple(example["input_ids"]) for example in prepared.train]
        held_out = [tuple(example["input_ids"]) for example in prepared.eval]
        assert not set(train) & set(held_out), f"seed {seed}: an eval row is also a train row"
        assert len(set(held_out)) == len(held_out)  # deduplicated


def _accounted(summary: dict) -> int:
    evaluation = summary["eval"]
    dropped = evaluation.get("held_out_duplicates_dropped", 0) + evaluation.get("removed_repeats_or_in_train", 0)
    return summary["train"]["rows"] + evaluation["rows"] + dropped


def test_the_data_summary_accounts_for_every_row_read_when_held_out_rows_have_copies(tmp_path, tokenizer):
    rows = [{"instruction": f"explain item {i}", "response": f"item {i} is a thing"} for i in range(51)]
    rows += rows[:8] + rows[:2]  # 61 rows: 8 rows twice more, 2 of them three times
    path = write_jsonl(tmp_path / "train.jsonl", rows)
    lines = len(path.read_text(encoding="utf-8").splitlines())
    dropped = []
    for seed in range(6):
        config = data_config(path, packing=False, eval_fraction=0.2, seed=seed)
        summary = prepare_data(tokenizer, config, LLAMA2_CHAT_TEMPLATE).summary
        assert summary["rows_read"] == lines == _accounted(summary), (seed, summary)
        dropped.append(summary["eval"]["held_out_duplicates_dropped"])
    assert any(dropped), "no seed held out a row with copies: the test would not exercise the count"


def test_the_data_summary_accounts_for_an_eval_channel_rows_too(tmp_path, tokenizer):
    rows = [{"instruction": f"explain item {i}", "response": f"item {i} is a thing"} for i in range(20)]
    train = write_jsonl(tmp_path / "train.jsonl", rows)
    evaluation = write_jsonl(tmp_path / "eval.jsonl", rows[:3] + [{"instruction": "new", "response": "x"}] * 2)
    config = data_config(train, packing=False, eval_data=str(evaluation), seed=0)
    summary = prepare_data(tokenizer, config, LLAMA2_CHAT_TEMPLATE).summary
    assert summary["rows_read"] == 20 + 5 == _accounted(summary)
    assert summary["eval"]["rows"] == 1 and summary["eval"]["removed_repeats_or_in_train"] == 4


def test_bad_hold_outs_are_one_line_errors(tmp_path, tokenizer):
    few = write_jsonl(tmp_path / "few.jsonl", [{"instruction": f"explain {i}", "response": "ok"} for i in range(7)])
    with pytest.raises(
        DataError,
        match=r"^7 distinct training rows are too few to hold out 4 for evaluation "
        r"\(--eval_fraction 0.1, at least --min_eval_rows 4\)",
    ) as error:
        config = data_config(few, packing=False, eval_fraction=0.1, min_eval_rows=4, seed=0)
        prepare_data(tokenizer, config, LLAMA2_CHAT_TEMPLATE)
    assert "\n" not in str(error.value)
    with pytest.raises(DataError, match=r"^eval channel: all 7 rows are also training rows \(or repeats\)$"):
        prepare_data(tokenizer, data_config(few, packing=False, eval_data=str(few), seed=0), LLAMA2_CHAT_TEMPLATE)
    no_answer = {"prompt": FEW_SHOT, "completion": [{"role": "user", "content": "and then"}]}
    with pytest.raises(DataError, match=r"row 1: field 'completion': no assistant message to learn from$"):
        _labelled(tmp_path, tokenizer, [no_answer])
