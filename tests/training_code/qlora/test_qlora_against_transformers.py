"""What the training pipeline feeds the model, example by example, against the plain transformers way.

The expected ids and labels of every row come from the tokenizer alone (each piece of the rendered chat,
prompt or completion tokenized on its own; the prompt pieces masked), and the expected packed form from
transformers' DataCollatorWithFlattening (positions restarting at 0, the first label of each example
ignored). The actual side is every batch of the trainer's own training dataloader.
"""

from __future__ import annotations

import random

import pytest
import torch
from qlora_chat_tokenizers import FAMILIES, family_tokenizer
from qlora_test_helpers import WORDS, write_jsonl
from transformers import DataCollatorWithFlattening

IGNORE = -100
MAX_SEQ_LENGTH = 96


def _sentence(rng: random.Random, low: int, high: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(rng.randint(low, high)))


def _chat(rng: random.Random) -> list[dict[str, str]]:
    turns = []
    for _ in range(rng.randint(1, 2)):
        turns += [
            {"role": "user", "content": f"explain {_sentence(rng, 1, 5)}"},
            {"role": "assistant", "content": _sentence(rng, 2, 12)},
        ]
    return turns


def _rows(count: int, seed: int) -> list[dict]:
    """Every format, mixed within one file: chats, instruction rows, prompt/completion strings and message lists."""
    rng = random.Random(seed)
    rows: list[dict] = []
    for index in range(count):
        kind = index % 4
        if kind == 0:
            rows.append({"messages": _chat(rng)})
        elif kind == 1:
            rows.append({"instruction": f"explain {_sentence(rng, 1, 5)}", "response": _sentence(rng, 2, 9)})
        elif kind == 2:
            rows.append({"prompt": f"Q: explain {_sentence(rng, 1, 4)}\nA:", "completion": " " + _sentence(rng, 2, 9)})
        else:
            chat = _chat(rng)
            rows.append({"prompt": chat[:-1], "completion": chat[-1:]})
    return rows


def _split_by_format(rows: list[dict]) -> dict[str, list[dict]]:
    """One file per format (the format is detected per file)."""
    files: dict[str, list[dict]] = {"messages": [], "instruction": [], "prompt_text": [], "prompt_chat": []}
    for row in rows:
        if "instruction" in row:
            files["instruction"].append(row)
        elif "messages" in row:
            files["messages"].append(row)
        elif isinstance(row["prompt"], str):
            files["prompt_text"].append(row)
        else:
            files["prompt_chat"].append(row)
    return files


def _ids(tokenizer, text: str) -> list[int]:
    return tokenizer(text, add_special_tokens=False)["input_ids"]


def _render(tokenizer, messages, generation_prompt=False) -> str:
    return tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=generation_prompt)


def _chat_expected(tokenizer, messages, answer_end: str, first_supervised: int) -> tuple[list[int], list[int]]:
    full = _render(tokenizer, messages)
    ids, labels, position = [], [], 0
    for index, message in enumerate(messages):
        if message["role"] != "assistant" or index < first_supervised:
            continue
        start = len(_render(tokenizer, messages[:index], generation_prompt=True))
        answer = message["content"] + answer_end
        assert full[start : start + len(answer)] == answer
        prompt = _ids(tokenizer, full[position:start])
        ids += prompt + _ids(tokenizer, answer)
        labels += [IGNORE] * len(prompt) + _ids(tokenizer, answer)
        position = start + len(answer)
    tail = _ids(tokenizer, full[position:])
    return ids + tail, labels + [IGNORE] * len(tail)


def expected_example(tokenizer, family, row: dict) -> tuple[list[int], list[int]]:
    """(ids, labels) of one row, the plain way: the tokenizer, its chat template, and -100 over the prompt."""
    if "instruction" in row:
        messages = [{"role": "user", "content": row["instruction"]}, {"role": "assistant", "content": row["response"]}]
        return _chat_expected(tokenizer, messages, family.answer_end, 0)
    if "messages" in row:
        return _chat_expected(tokenizer, row["messages"], family.answer_end, 0)
    if isinstance(row["prompt"], list):
        messages = row["prompt"] + row["completion"]
        return _chat_expected(tokenizer, messages, family.answer_end, len(row["prompt"]))
    bos = [tokenizer.bos_token_id] if tokenizer.bos_token_id is not None else []
    prompt, completion = _ids(tokenizer, row["prompt"]), _ids(tokenizer, row["completion"])
    eos = [tokenizer.eos_token_id]
    return bos + prompt + completion + eos, [IGNORE] * (len(bos) + len(prompt)) + completion + eos


def _model_folder(tmp_path_factory, name: str, texts: list[str]):
    from finetune.tiny import tiny_llama_config
    from transformers import LlamaForCausalLM

    family = FAMILIES[name]
    tokenizer = family_tokenizer(family, texts)
    folder = tmp_path_factory.mktemp(f"model_{name}")
    torch.manual_seed(0)
    LlamaForCausalLM(tiny_llama_config(tokenizer)).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder, family, tokenizer


def fed_batches(argv: list[str]):
    """The training batches exactly as the trainer's dataloader hands them to the model, the data summary and the
    trainer's training dataset."""
    from finetune.args import parse_args
    from finetune.report import RunReport
    from finetune.run import load_for_training
    from finetune.trainer import build_trainer

    config = parse_args(argv, env={})
    tokenizer, data, model = load_for_training(config, RunReport({}))
    trainer = build_trainer(model, config, data, tokenizer, [])
    return list(trainer.get_train_dataloader()), data.summary, trainer.train_dataset


def fed_examples(batches: list[dict], pad_token_id: int) -> list[dict[str, list[int]]]:
    """Each example of each batch: a padded row (attention_mask), or a stretch of a packed row between position
    resets; padding (all pad ids, no label) is skipped."""
    examples = []
    for batch in batches:
        for row in range(batch["input_ids"].shape[0]):
            ids, labels = batch["input_ids"][row].tolist(), batch["labels"][row].tolist()
            if "attention_mask" in batch:
                length = int(batch["attention_mask"][row].sum())
                examples.append({"input_ids": ids[:length], "labels": labels[:length], "padding": labels[length:]})
                continue
            positions = batch["position_ids"][row].tolist()
            starts = [i for i, p in enumerate(positions) if p == 0] + [len(positions)]
            for start, end in zip(starts, starts[1:], strict=False):
                piece = {"input_ids": ids[start:end], "labels": labels[start:end], "position_ids": positions[start:end]}
                if set(piece["input_ids"]) == {pad_token_id} and set(piece["labels"]) == {IGNORE}:
                    continue
                examples.append(piece)
    return examples


@pytest.fixture(scope="module")
def prepared(tmp_path_factory):
    rows = _rows(160, seed=5)
    texts = [str(value) for row in rows for value in row.values()] * 2
    cases = {}
    for name in ("chatml", "llama3", "mistral"):
        folder, family, tokenizer = _model_folder(tmp_path_factory, name, texts)
        expected = {}
        for row in rows:
            ids, labels = expected_example(tokenizer, family, row)
            expected.setdefault(tuple(ids), labels)
        cases[name] = (folder, tokenizer, expected)
    return rows, cases


@pytest.mark.parametrize("packing", [True, False], ids=["packed", "unpacked"])
@pytest.mark.parametrize("name", ["chatml", "llama3", "mistral"])
def test_every_fed_example_has_the_plain_transformers_labels_and_positions(prepared, tmp_path, name, packing):
    rows, cases = prepared
    folder, tokenizer, expected = cases[name]
    data = tmp_path / "data"
    data.mkdir()
    for kind, kind_rows in _split_by_format(rows).items():
        write_jsonl(data / f"train_{kind}.jsonl", kind_rows)
    argv = ["--model_id", str(folder), "--train_data", str(data), "--train_files", "*.jsonl"]
    argv += ["--output_dir", str(tmp_path / "out"), "--max_seq_length", str(MAX_SEQ_LENGTH)]
    argv += ["--per_device_batch_size", "4", "--compute_dtype", "float32", "--method", "lora"]
    argv += ["--packing" if packing else "--no-packing", "--no-group_by_length"]
    batches, summary, dataset = fed_batches(argv)
    fed = fed_examples(batches, tokenizer.pad_token_id)
    assert len(fed) == summary["train"]["rows"] == len(rows) - summary["eval"]["rows"]
    flatten = DataCollatorWithFlattening(return_tensors="pt")
    matched = 0
    for example in fed:
        labels = expected[tuple(example["input_ids"])]  # KeyError: an example the tokenizer alone does not give
        if packing:
            reference = flatten([{"input_ids": example["input_ids"], "labels": labels}])
            same = (
                example["labels"] == reference["labels"][0].tolist()
                and example["position_ids"] == reference["position_ids"][0].tolist()
            )
        else:
            same = example["labels"] == labels and set(example["padding"]) <= {IGNORE}
        matched += same
    print(f"{name} {'packed' if packing else 'unpacked'}: {matched} of {len(fed)} fed examples identical")
    assert matched == len(fed)
    if packing:  # best-fit rows of at most the pack length; a longer example alone in its row
        lengths = dataset["seq_lengths"]
        assert all(sum(row) <= summary["pack_length"] or len(row) == 1 for row in lengths)
        assert len(lengths) < len(fed) and summary["pack_length"] < MAX_SEQ_LENGTH
