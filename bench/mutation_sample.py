"""A seeded sample of mutmut 2.5.1's mutants, for when the full run (bench/mutation.py) does not fit the time there is.

    .venv-mutation/bin/python bench/mutation_sample.py --size 36 --seed 39 --label sample --output bench/mutation.json

Every mutant of the mutated paths is listed with mutmut's own enumerator (list_mutations), `--size` of them are drawn
with random.Random(seed).sample over that list in file/line order, and each is applied in a copy of the tree and run
against the in-process tests that cover its file in bench/mutation.py's stages (TESTS), `-x`.
"""

from __future__ import annotations

import argparse
import json
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from mutation import DESELECT, PATHS_TO_MUTATE, REASONS, ROOT, TESTS, copy_tree, record  # noqa: E402

PYTEST = ["-x", "-q", "-p", "no:cacheprovider", "-p", "xdist.plugin", "-n", "0", "--no-header"]


def every_mutant(root: Path) -> list[tuple[str, object]]:
    from mutmut import Context, list_mutations

    files = []
    for path in PATHS_TO_MUTATE:
        files += sorted((root / path).rglob("*.py")) if path.endswith("/") else [root / path]
    found = []
    for file in files:
        name = str(file.relative_to(root))
        context = Context(source=file.read_text(encoding="utf-8"), filename=name, dict_synonyms=[])
        found += [(name, mutation_id) for mutation_id in list_mutations(context)]
    return found


def stages_for(name: str, copy: Path) -> list[list[str]]:
    prefix = next(p for p in TESTS if name.startswith(p))
    return [[t for t in stage if (copy / t).exists()] for stage in TESTS[prefix]]


def killed_by_a_stage(copy: Path, name: str) -> bool:
    """bench/mutation.py's stages: the next one runs only while the mutant survives."""
    for stage in filter(None, stages_for(name, copy)):
        argv = [str(copy / ".venv/bin/python"), "-m", "pytest", *PYTEST, "-k", DESELECT, *stage]
        env = {"PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1", "PATH": "/usr/bin:/bin"}
        if subprocess.run(argv, cwd=copy, env=env, capture_output=True, timeout=120).returncode != 0:
            return True
    return False


def run_one(copy: Path, name: str, mutation_id) -> dict:
    from mutmut import Context, mutate

    target = copy / name
    original = target.read_text(encoding="utf-8")
    context = Context(source=original, filename=name, mutation_id=mutation_id, dict_synonyms=[])
    mutated, _ = mutate(context)
    target.write_text(mutated, encoding="utf-8")
    try:
        try:
            status = "ok_killed" if killed_by_a_stage(copy, name) else "bad_survived"
        except subprocess.TimeoutExpired:
            status = "bad_timeout"
    finally:
        target.write_text(original, encoding="utf-8")
    number = mutation_id.line_number
    return {
        "file": name,
        "line": number + 1,
        "status": status,
        "original": original.split("\n")[number].strip(),
        "mutated": mutated.split("\n")[number].strip(),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=36)
    parser.add_argument("--seed", type=int, default=39)
    parser.add_argument("--label", default="sample")
    parser.add_argument("--output", type=Path)
    parser.add_argument("--progress", type=Path, help="append each mutant's result here as it finishes (JSON lines)")
    args = parser.parse_args(argv)
    population = every_mutant(ROOT)
    chosen = random.Random(args.seed).sample(range(len(population)), min(args.size, len(population)))
    start = time.perf_counter()
    rows = []
    with tempfile.TemporaryDirectory(prefix="mutation-sample-") as tmp:
        copy = Path(tmp)
        copy_tree(ROOT, copy)
        for index in sorted(chosen):
            row = run_one(copy, *population[index])
            rows.append(row)
            if args.progress:
                with args.progress.open("a", encoding="utf-8") as out:
                    out.write(json.dumps(row) + "\n")
    killed = sum(r["status"] != "bad_survived" for r in rows)
    entry = {
        "mutmut": "2.5.1",
        "method": f"random.Random({args.seed}).sample of {len(rows)} from all {len(population)} mutants",
        "population": len(population),
        "per_file_population": {f: sum(p[0] == f for p in population) for f in sorted({p[0] for p in population})},
        "generated": len(rows),
        "killed": killed,
        "timeouts": sum(r["status"] == "bad_timeout" for r in rows),
        "survived": len(rows) - killed,
        "score_percent": round(100 * killed / len(rows), 1) if rows else None,
        "seconds": round(time.perf_counter() - start),
        "per_file": {
            f: {
                "sampled": sum(r["file"] == f for r in rows),
                "survived": sum(r["file"] == f and r["status"] == "bad_survived" for r in rows),
            }
            for f in sorted({r["file"] for r in rows})
        },
        "survivors": [
            {**r, "reason": REASONS.get((r["file"], r["original"], r["mutated"]), "unexplained")}
            for r in rows
            if r["status"] == "bad_survived"
        ],
    }
    record(entry, args.output, args.label)
    return 0


if __name__ == "__main__":
    sys.exit(main())
