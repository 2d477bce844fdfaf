"""Instruction rows shaped like databricks-dolly-15k: short instructions, an optional long context, long-tailed answers.

Used by the benchmarks for realistic length distributions (20 to ~1,500 tokens per rendered row), not for
training a useful model: the words are random. Deterministic for a given seed.

    python data/make_dolly_shaped.py --rows 2000 --out /tmp/dolly_shaped.jsonl
"""

from __future__ import annotations

import argparse
import json
import math
import random
from pathlib import Path

CONTEXT_SHARE = 0.35  # about a third of dolly's rows (closed QA, summarization, extraction) carry a context
MAX_WORDS = 1150  # words per row at most; ~2.5 % of rows still exceed 1,536 benchmark tokens (dropped alike)


def _lognormal_words(rng: random.Random, median: float, sigma: float, low: int, high: int) -> int:
    return int(min(high, max(low, rng.lognormvariate(math.log(median), sigma))))


def dolly_shaped_rows(count: int, seed: int = 0) -> list[dict[str, str]]:
    rng = random.Random(seed)
    letters = "abcdefghijklmnopqrstuvwxyz"
    vocabulary = ["".join(rng.choice(letters) for _ in range(rng.randint(2, 9))) for _ in range(3000)]

    def words(count_: int) -> str:
        return " ".join(rng.choice(vocabulary) for _ in range(count_))

    rows = []
    for _ in range(count):
        instruction = _lognormal_words(rng, 12, 0.5, 3, 60)
        context = _lognormal_words(rng, 120, 0.9, 10, 900) if rng.random() < CONTEXT_SHARE else 0
        response = _lognormal_words(rng, 55, 1.0, 1, 700)
        response = max(1, min(response, MAX_WORDS - instruction - context))
        row = {"instruction": words(instruction), "response": words(response)}
        if context:
            row["context"] = words(context)
        rows.append(row)
    return rows


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=2000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", required=True)
    args = parser.parse_args(argv)
    out = Path(args.out)
    out.write_text("".join(json.dumps(row) + "\n" for row in dolly_shaped_rows(args.rows, args.seed)), "utf-8")
    print(f"{args.rows} rows written to {out}")


if __name__ == "__main__":
    main()
