"""Reading, validating, rendering, tokenizing, splitting, packing and collating training data."""

from __future__ import annotations

import json

import pytest
import torch
from finetune.data import (
    IGNORE_INDEX,
    prepare_data,
    split_for_eval,
    tokenize_text,
)
from finetune.format import render_rows
from finetune.rows import DataError, read_rows
from finetune.templates import LLAMA2_CHAT_TEMPLATE
from qlora_test_helpers import data_config, instruction_rows, text_rows, write_jsonl


def texts(path, tokenizer, template=LLAMA2_CHAT_TEMPLATE, **read):
    kind, rendered = render_rows(read_rows(path, **read), tokenizer, template)
    return kind, [row.text for row in rendered]


def test_text_rows_keep_their_format_with_a_single_bos_and_a_final_eos(tmp_path, tokenizer):
    path = write_jsonl(tmp_path / "train.jsonl", text_rows(5))
    kind, rendered = texts(path, tokenizer)
    assert kind == "text" and rendered[0] == text_rows(5)[0]["text"]
    ids = tokenize_text(rendered[0], tokenizer)
    assert ids[0] == tokenizer.bos_token_id and ids.count(tokenizer.bos_token_id) == 1
    assert ids[-1] == tokenizer.eos_token_id and ids.count(tokenizer.eos_token_id) == 1
    plain = tokenize_text("alpha beta", tokenizer)  # no special tokens written out: both are added
    assert plain[0] == tokenizer.bos_token_id and plain[-1] == tokenizer.eos_token_id


def test_instruction_rows_use_llama2_inst_format_without_a_chat_template(tmp_path, tokenizer):
    rows = [{"instruction": "say hi", "input": "to the team", "output": "hi team"}]
    kind, rendered = texts(write_jsonl(tmp_path / "i.jsonl", rows), tokenizer)
    assert kind == "instruction"
    assert rendered == ["<s>[INST] say hi\n\nto the team [/INST] hi team </s>"]


def test_instruction_rows_use_the_chat_template_when_the_tokenizer_has_one(tmp_path, chat_tokenizer):
    rows = [{"instruction": "say hi", "context": "politely", "response": "hello"}]
    _, rendered = texts(write_jsonl(tmp_path / "i.jsonl", rows), chat_tokenizer, chat_tokenizer.chat_template)
    assert rendered == ["<s><|user|>\nsay hi\n\npolitely\n<|assistant|>\nhello\n</s>"]
    ids = tokenize_text(rendered[0], chat_tokenizer)
    assert ids.count(chat_tokenizer.bos_token_id) == 1 and ids[-1] == chat_tokenizer.eos_token_id


@pytest.mark.parametrize(
    ("row", "field"),
    [
        ({"instruction": "q"}, "'response' (or 'output')"),
        ({"instruction": "  ", "response": "a"}, "'instruction'"),
        ({"response": "a"}, "'instruction'"),
    ],
)
def test_malformed_instruction_row_names_file_row_and_field(tmp_path, tokenizer, row, field):
    rows = instruction_rows(4)
    rows.insert(2, row)  # third row of the file
    path = write_jsonl(tmp_path / "bad.jsonl", rows)
    with pytest.raises(DataError) as error:
        texts(path, tokenizer)
    assert str(error.value) == f"{path}: row 3: missing or empty field {field}"


def test_malformed_text_row_in_json_and_parquet_files(tmp_path, tokenizer):
    import pyarrow as pa
    import pyarrow.parquet as pq

    rows = text_rows(6)
    rows[4] = {"text": None}
    json_path = tmp_path / "bad.json"
    json_path.write_text(json.dumps(rows))
    parquet_path = tmp_path / "bad.parquet"
    pq.write_table(pa.Table.from_pylist(rows), parquet_path)
    for path in (json_path, parquet_path):
        with pytest.raises(DataError, match=rf"^{path}: row 5: missing or empty field 'text'$"):
            texts(path, tokenizer)


def test_invalid_json_line_is_reported_with_its_line_number(tmp_path):
    path = tmp_path / "broken.jsonl"
    path.write_text('{"text": "a"}\n\n{"text": \n')
    with pytest.raises(DataError, match=r"broken.jsonl: row 3: invalid JSON"):
        read_rows(path)


def test_rows_without_any_known_field_are_rejected(tmp_path, tokenizer):
    path = write_jsonl(tmp_path / "x.jsonl", [{"question": "q", "answer": "a"}])
    with pytest.raises(DataError, match=r"row 1: missing field 'text'"):
        texts(path, tokenizer)


def test_folders_of_files_and_saved_datasets_are_read(tmp_path):
    import datasets

    folder = tmp_path / "channel"
    folder.mkdir()
    write_jsonl(folder / "train-b.jsonl", text_rows(2, seed=5))
    write_jsonl(folder / "train-a.jsonl", text_rows(3, seed=6))
    rows = read_rows(folder)
    assert [row.source.rsplit("/", 1)[-1] for row in rows] == ["train-a.jsonl"] * 3 + ["train-b.jsonl"] * 2

    saved = tmp_path / "saved"
    datasets.DatasetDict({"train": datasets.Dataset.from_list(instruction_rows(7))}).save_to_disk(str(saved))
    loaded = read_rows(saved)
    assert len(loaded) == 7 and loaded[6].row_number == 7 and loaded[0].fields["instruction"]


def test_prepare_data_packs_whole_examples_and_holds_out_an_eval_split(tmp_path, tokenizer):
    path = write_jsonl(tmp_path / "train.jsonl", instruction_rows(40))
    packed = prepare_data(tokenizer, data_config(path, eval_fraction=0.1, seed=3), LLAMA2_CHAT_TEMPLATE)
    assert packed.summary["train"]["rows"] == 36 and packed.summary["eval"]["rows"] == 4
    assert max(len(example["input_ids"]) for example in packed.train) <= 64
    unpacked = prepare_data(
        tokenizer, data_config(path, eval_fraction=0.1, seed=3, packing=False), LLAMA2_CHAT_TEMPLATE
    )
    assert len(unpacked.train) == 36 - unpacked.summary["train"]["dropped_too_long"]
    # Packing loses no token and no supervised token: whole examples only.
    for part in ("train", "eval"):
        assert packed.summary[part]["tokens"] == unpacked.summary[part]["tokens"]
        assert packed.summary[part]["supervised_tokens"] == unpacked.summary[part]["supervised_tokens"]
    assert -(-packed.summary["train"]["tokens"] // 64) <= len(packed.train) <= len(unpacked.train) / 2


def test_eval_split_is_seeded_disjoint_and_never_empties_training():
    items = list(range(20))
    train, held_out = split_for_eval(items, 0.25, seed=1)
    assert sorted(train + held_out) == items and len(held_out) == 5
    assert split_for_eval(items, 0.25, seed=1) == (train, held_out)
    assert split_for_eval(items, 0.25, seed=2) != (train, held_out)
    with pytest.raises(DataError):
        split_for_eval([1], 0.5, seed=0)


def test_trls_collator_masks_padding_but_keeps_an_eos_equal_to_pad():
    """The collator the trainer uses (TRL's): padding is found by length, not by the pad id, which is EOS here."""
    from trl.trainer.sft_trainer import DataCollatorForLanguageModeling

    eos = 2
    batch = DataCollatorForLanguageModeling(pad_token_id=eos)([{"input_ids": [1, 5, eos]}, {"input_ids": [1, eos]}])
    assert batch["input_ids"].tolist() == [[1, 5, eos], [1, eos, eos]]
    assert batch["attention_mask"].tolist() == [[1, 1, 1], [1, 1, 0]]
    assert batch["labels"].tolist() == [[1, 5, eos], [1, eos, IGNORE_INDEX]]
    assert batch["labels"].dtype == torch.long


def test_a_folder_channel_never_reads_a_test_split_by_accident(tmp_path):
    folder = tmp_path / "channel"
    folder.mkdir()
    write_jsonl(folder / "train.jsonl", text_rows(3))
    write_jsonl(folder / "test.jsonl", text_rows(5))
    write_jsonl(folder / "validation.jsonl", text_rows(2))
    assert {row.source.rsplit("/", 1)[-1] for row in read_rows(folder)} == {"train.jsonl"}
    assert {row.source.rsplit("/", 1)[-1] for row in read_rows(folder, role="eval")} == {"validation.jsonl"}
    assert len(read_rows(folder, files="*.jsonl")) == 10  # an explicit glob takes what it says
    single = tmp_path / "single"
    single.mkdir()
    write_jsonl(single / "data.jsonl", text_rows(4))
    assert len(read_rows(single)) == 4  # the only file of a channel is its data, whatever its name
    (folder / "train.jsonl").unlink()
    with pytest.raises(DataError, match=r"several data files and none named train\*; pass --train_files"):
        read_rows(folder)


def test_saved_dataset_dicts_give_train_and_validation_splits_never_test(tmp_path):
    import datasets

    saved = tmp_path / "saved"
    datasets.DatasetDict(
        {
            "train": datasets.Dataset.from_list(text_rows(6)),
            "validation": datasets.Dataset.from_list(text_rows(2, seed=8)),
            "test": datasets.Dataset.from_list(text_rows(3, seed=9)),
        }
    ).save_to_disk(str(saved))
    assert len(read_rows(saved)) == 6 and read_rows(saved)[0].source.endswith("[train]")
    assert len(read_rows(saved, role="eval")) == 2
    assert len(read_rows(saved, split="test", role="eval")) == 3  # only when asked for by name
    only_test = tmp_path / "only_test"
    datasets.DatasetDict(
        {"train": datasets.Dataset.from_list(text_rows(2)), "test": datasets.Dataset.from_list(text_rows(2))}
    ).save_to_disk(str(only_test))
    with pytest.raises(DataError, match=r"no 'validation' or 'valid' or 'eval' or 'dev' split .*--eval_split"):
        read_rows(only_test, role="eval")


def _prepared(tmp_path, tokenizer, rows, **options):
    path = write_jsonl(tmp_path / "train.jsonl", rows)
    return prepare_data(tokenizer, data_config(path, seed=0, **options), LLAMA2_CHAT_TEMPLATE)


def test_long_rows_are_dropped_and_counted_or_cut_keeping_their_eos(tmp_path, tokenizer):
    rows = [{"instruction": "explain llama", "response": "alpha " * n} for n in (3, 60, 4, 80)]
    dropped = _prepared(tmp_path, tokenizer, rows, max_seq_length=48, packing=False)
    assert dropped.summary["train"]["dropped_too_long"] == 2 and dropped.summary["train"]["examples"] == 2
    kept = _prepared(tmp_path, tokenizer, rows, max_seq_length=48, packing=False, truncation="keep_eos")
    assert kept.summary["train"]["truncated_rows"] == 2 and kept.summary["train"]["examples"] == 4
    for example in kept.train:
        assert len(example["input_ids"]) <= 48
        assert example["input_ids"][-1] == example["labels"][-1] == tokenizer.eos_token_id


def test_a_row_whose_prompt_fills_max_seq_length_is_dropped_and_all_dropped_is_one_line(tmp_path, tokenizer):
    rows = [{"instruction": "explain " * 60, "response": "ok"}, {"instruction": "why", "response": "because"}]
    prepared = _prepared(tmp_path, tokenizer, rows, max_seq_length=32, packing=True, truncation="keep_eos")
    # Cut to part of its prompt + EOS, it would teach stopping before answering: dropped and counted instead.
    assert prepared.summary["train"]["dropped_no_supervised_tokens"] == 1
    assert prepared.summary["train"]["truncated_rows"] == 0 and prepared.summary["train"]["rows"] == 2
    with pytest.raises(DataError, match=r"^training data: all 2 rows were dropped .* raise --max_seq_length"):
        _prepared(tmp_path, tokenizer, rows * 1, max_seq_length=4, packing=False)


def test_a_dataset_folder_with_its_completion_marker_reads_only_the_shards(tmp_path):
    """The Training rule starts on `datasets/<name>/_READY`, and the channel downloads the whole folder: the
    (empty) marker sits beside the shards and is never read as data, with any --train_files pattern."""
    import datasets

    folder = tmp_path / "guanaco"
    folder.mkdir()
    for index in range(3):
        write_jsonl(folder / f"train-{index:05d}.jsonl", text_rows(2, seed=index))
    (folder / "_READY").write_bytes(b"")
    assert len(read_rows(folder)) == 6
    assert len(read_rows(folder, files="*")) == 6
    assert {row.source.rsplit("/", 1)[-1] for row in read_rows(folder)} == {f"train-{i:05d}.jsonl" for i in range(3)}
    single = tmp_path / "single"
    single.mkdir()
    write_jsonl(single / "part-0.jsonl", text_rows(4))
    (single / "_READY").write_bytes(b"")
    assert len(read_rows(single)) == 4  # still the only data file of the channel
    saved = tmp_path / "saved"
    datasets.DatasetDict({"train": datasets.Dataset.from_list(instruction_rows(3))}).save_to_disk(str(saved))
    (saved / "_READY").write_bytes(b"")
    assert len(read_rows(saved)) == 3
