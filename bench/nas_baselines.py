"""Naive baselines on the shipped sentence pairs: what a model must beat for its accuracy to mean anything.

- bag of words: logistic regression on premise and hypothesis unigrams + bigrams (kept apart: ``p:`` / ``h:``
  features), the classic NLI baseline;
- hypothesis only: the same on the hypothesis alone (annotation artefacts);
- word overlap: "entailed iff at least a share t of the hypothesis words occur in the premise", t tuned on
  the training rows (the HANS heuristic).

All fit on the same train rows the models train on (the 70/30 cut of ``train.jsonl``, seed 42) and score
the held-out ``test.jsonl``, with a 95 % Wilson interval; per construction family where rows name one.

    .venv/bin/python bench/nas_baselines.py [--data-dir training_code/nas/sample_data] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import math
import re
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "training_code" / "nas"))

from pruning.data import load_splits  # noqa: E402

WORD = re.compile(r"[a-z0-9]+")


def wilson(correct: int, total: int, z: float = 1.96) -> tuple[float, float]:
    """95 % Wilson score interval of a proportion."""
    if total == 0:
        return (0.0, 1.0)
    p = correct / total
    centre = (p + z * z / (2 * total)) / (1 + z * z / total)
    half = z * math.sqrt(p * (1 - p) / total + z * z / (4 * total * total)) / (1 + z * z / total)
    return (centre - half, centre + half)


def words(text: str) -> list[str]:
    return WORD.findall(text.lower())


def features(pair, hypothesis_only: bool) -> str:
    """Space-separated tokens; premise and hypothesis words are prefixed so they stay distinct features."""
    hypothesis = " ".join(f"h_{w}" for w in words(pair.sentence2))
    if hypothesis_only:
        return hypothesis
    return " ".join(f"p_{w}" for w in words(pair.sentence1)) + " " + hypothesis


def logistic_predictions(train, test, hypothesis_only: bool) -> list[int]:
    from sklearn.feature_extraction.text import CountVectorizer
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline

    model = make_pipeline(
        CountVectorizer(ngram_range=(1, 2), token_pattern=r"\S+", binary=True),
        LogisticRegression(C=1.0, max_iter=2000),
    )
    model.fit([features(p, hypothesis_only) for p in train], [p.label for p in train])
    return [int(y) for y in model.predict([features(p, hypothesis_only) for p in test])]


def overlap(pair) -> float:
    premise, hypothesis = set(words(pair.sentence1)), words(pair.sentence2)
    return sum(w in premise for w in hypothesis) / max(1, len(hypothesis))


def overlap_predictions(train, test) -> list[int]:
    """Label 0 (entailment) when the overlap reaches the threshold that is best on the train rows."""

    def accuracy(threshold):
        return sum((overlap(p) >= threshold) == (p.label == 0) for p in train)

    best = max(sorted({overlap(p) for p in train}), key=accuracy)
    return [0 if overlap(p) >= best else 1 for p in test]


def score(predictions: list[int], pairs, families: list[str] | None) -> dict:
    correct = [int(y == p.label) for y, p in zip(predictions, pairs, strict=True)]
    result = {"accuracy": sum(correct) / len(correct), "ci95": wilson(sum(correct), len(correct))}
    if families:
        result["by_family"] = {
            family: sum(c for c, f in zip(correct, families, strict=True) if f == family) / families.count(family)
            for family in sorted(set(families))
        }
    return result


def test_families(data_dir: Path) -> list[str] | None:
    rows = [json.loads(line) for line in (data_dir / "test.jsonl").read_text().splitlines() if line.strip()]
    return [r["family"] for r in rows] if all("family" in r for r in rows) else None


def baselines(data_dir: Path, split_seed: int = 42, validation_fraction: float = 0.3) -> dict:
    splits = load_splits("jsonl", data_dir, validation_fraction, split_seed)
    train, test = splits["train"], splits["test"]
    families = test_families(data_dir)
    return {
        "train_rows": len(train),
        "test_rows": len(test),
        "bag_of_words": score(logistic_predictions(train, test, hypothesis_only=False), test, families),
        "hypothesis_only": score(logistic_predictions(train, test, hypothesis_only=True), test, families),
        "word_overlap": score(overlap_predictions(train, test), test, families),
        "majority": score([0] * len(test), test, None),
    }


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data-dir", type=Path, default=REPO / "training_code" / "nas" / "sample_data")
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args(argv)
    result = baselines(args.data_dir)
    for name in ("bag_of_words", "hypothesis_only", "word_overlap", "majority"):
        low, high = result[name]["ci95"]
        print(f"{name:16s} {result[name]['accuracy']:.3f} [{low:.3f}, {high:.3f}]")
        for family, accuracy in result[name].get("by_family", {}).items():
            print(f"    {family:12s} {accuracy:.3f}")
    if args.json:
        args.json.write_text(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
