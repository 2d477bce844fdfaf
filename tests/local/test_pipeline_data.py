"""`make pipeline DATA=... BASE=...`: the user's dataset is checked with train.py's own readers and row checks
(with the base's tokenizer) before any upload, and goes up as its files plus the `_READY` marker."""

from __future__ import annotations

import json
import sys

import pytest

from local import demo, pipeline

sys.path.insert(0, str(demo.QLORA))


@pytest.fixture(scope="module")
def base(tmp_path_factory):
    from finetune.tiny import build_tiny_llama

    texts = [line for line in demo.DATA.read_text().splitlines() if line.strip()]
    return build_tiny_llama(tmp_path_factory.mktemp("base"), texts, vocab_size=256)


def _jsonl(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_a_good_dataset_is_summarised(base, tmp_path):
    data = _jsonl(tmp_path / "train.jsonl", [{"instruction": "q", "response": "a"}] * 5)
    assert pipeline.check_dataset(data, base).startswith("5 row(s), format instruction")


def test_a_bad_row_stops_the_run_with_train_pys_message(base, tmp_path):
    data = _jsonl(tmp_path / "train.jsonl", [{"instruction": "q", "response": "a"}, {"instruction": "q"}])
    with pytest.raises(SystemExit, match=r"pipeline: the dataset would fail train.py: .*train.jsonl: row 2"):
        pipeline.check_dataset(data, base)


def test_a_file_goes_up_in_shards_and_a_folder_as_its_files_then_the_marker(tmp_path):
    data = _jsonl(tmp_path / "train.jsonl", [{"text": str(i)} for i in range(7)])
    keys = [k for k, _ in pipeline.shards(data, 3)]
    assert keys == [f"datasets/instructions/train-0000{i}.jsonl" for i in range(3)] + ["datasets/instructions/_READY"]
    folder = tmp_path / "folder"
    folder.mkdir()
    _jsonl(folder / "a.jsonl", [{"text": "x"}])
    (folder / "b.parquet").write_bytes(b"PAR1")
    keys = [k for k, _ in pipeline.shards(folder, 3)]
    assert keys == ["datasets/instructions/a.jsonl", "datasets/instructions/b.parquet", "datasets/instructions/_READY"]
