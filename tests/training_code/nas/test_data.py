"""Shipped dataset, split and row-numbered errors for malformed files."""

from __future__ import annotations

import json
from collections import Counter

import pytest
from pruning.data import DatasetFormatError, load_splits, read_pairs_jsonl, split_train_validation


def test_shipped_pairs_are_balanced_and_test_is_held_out(sample_data_dir):
    train = read_pairs_jsonl(sample_data_dir / "train.jsonl")
    test = read_pairs_jsonl(sample_data_dir / "test.jsonl")
    assert len(train) >= 300 and len(test) >= 100
    for rows in (train, test):
        counts = Counter(p.label for p in rows)
        assert abs(counts[0] - counts[1]) <= len(rows) * 0.1
    assert not {(p.sentence1, p.sentence2) for p in train} & {(p.sentence1, p.sentence2) for p in test}


def test_split_is_70_30_and_reproducible(sample_data_dir):
    splits = load_splits("jsonl", sample_data_dir, validation_fraction=0.3, seed=42)
    again = load_splits("jsonl", sample_data_dir, validation_fraction=0.3, seed=42)
    other = load_splits("jsonl", sample_data_dir, validation_fraction=0.3, seed=1)
    total = len(splits["train"]) + len(splits["validation"])
    assert len(splits["validation"]) == round(total * 0.3)
    assert splits == again and splits["validation"] != other["validation"]
    assert not set(splits["train"]) & set(splits["validation"])
    train, validation = split_train_validation(list(range(10)), 0.3, 42)
    assert sorted(train + validation) == list(range(10))


@pytest.mark.parametrize(
    ("bad_line", "message"),
    [
        ("{not json", "row 3: invalid JSON"),
        (json.dumps({"sentence1": "a", "sentence2": "b"}), "row 3: missing 'label'"),
        (json.dumps({"sentence1": "a", "sentence2": "b", "label": "maybe"}), "row 3: label must be"),
        (json.dumps({"sentence1": "", "sentence2": "b", "label": 0}), "row 3: 'sentence1' must be"),
        (json.dumps({"sentence1": "a", "sentence2": 5, "label": 1}), "row 3: 'sentence2' must be"),
        (json.dumps(["a", "b", 0]), "row 3: expected a JSON object"),
    ],
)
def test_malformed_row_fails_with_its_number(tmp_path, bad_line, message):
    good = json.dumps({"sentence1": "A dog runs.", "sentence2": "An animal moves.", "label": "entailment"})
    path = tmp_path / "train.jsonl"
    path.write_text(f"{good}\n{good}\n{bad_line}\n{good}\n")
    with pytest.raises(DatasetFormatError, match=message):
        read_pairs_jsonl(path)


def test_labels_accept_names_and_ids(tmp_path):
    path = tmp_path / "pairs.jsonl"
    rows = [{"sentence1": "a", "sentence2": "b", "label": label} for label in ("entailment", "not_entailment", 0, 1)]
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n\n")
    assert [p.label for p in read_pairs_jsonl(path)] == [0, 1, 0, 1]


def _shipped_rows(sample_data_dir, name):
    return [json.loads(line) for line in (sample_data_dir / name).read_text().splitlines() if line.strip()]


def test_shipped_task_is_balanced_per_construction_and_rte_length(sample_data_dir, minilm_path):
    """Four constructions, half entailed each; premises open RTE-style and carry 0-3 side sentences in equal
    shares, so half the pairs are RTE length (60-120 word pieces) and all fit the training max length."""
    from transformers import AutoTokenizer

    rows = _shipped_rows(sample_data_dir, "test.jsonl")
    families = Counter((r["family"], r["label"]) for r in rows)
    assert {f for f, _ in families} == {"negation", "embedded", "quantifiers", "events"}
    for (family, _), count in families.items():
        assert abs(count - families[(family, "entailment")]) <= 1  # each construction: half entailed
    sides = Counter(r["side_sentences"] for r in rows)
    assert set(sides) == {0, 1, 2, 3} and max(sides.values()) - min(sides.values()) < 0.05 * len(rows)
    tokenizer = AutoTokenizer.from_pretrained(minilm_path)
    lengths = sorted(len(tokenizer(r["sentence1"], r["sentence2"])["input_ids"]) for r in rows[:800])
    assert 50 <= lengths[len(lengths) // 2] <= 70 and lengths[-1] <= 128
    assert 0.4 <= sum(60 <= n <= 120 for n in lengths) / len(lengths) <= 0.6


def test_shipped_task_is_not_solved_by_words(sample_data_dir):
    """Bag of words and hypothesis-only baselines stay at or below 0.70 on the test split: the task needs
    more than word overlap."""
    import importlib.util

    from nas_test_helpers import REPO

    spec = importlib.util.spec_from_file_location("nas_baselines", REPO / "bench" / "nas_baselines.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    result = module.baselines(sample_data_dir)
    assert result["test_rows"] == 4000
    for name in ("bag_of_words", "hypothesis_only", "word_overlap"):
        assert result[name]["accuracy"] <= 0.70, (name, result[name])
