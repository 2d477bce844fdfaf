"""Multi-objective search over the sub-networks of a trained super-network, in one process.

Writes to --output-dir: trials.json / trials.csv (every trial, configuration and metrics in one record),
pareto.json (the front sorted by size, its hypervolume and reference point, the unpruned model, and each
front member re-scored on the test split as ``test_error``) and pareto_front.png. With the deterministic
``macs`` objective (MACs at the validation split's mean length) in place of the noisy ``latency_ms``, the
final front is still timed for real: ``latency_ms_final``, every member and the unpruned network
interleaved round by round on the same batch.

    python search_subnetworks.py --model-dir out/supernet --data-dir sample_data --num-samples 100
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from pruning.cli import (
    add_data_arguments,
    add_runtime_arguments,
    apply_runtime,
    load_classifier,
    load_data,
    resolve_split,
    sm_default,
    supernet_metadata,
)
from pruning.pareto import OBJECTIVES, parse_objectives
from pruning.report import PARETO_JSON, write_pareto, write_trials
from pruning.search import SEARCHERS, run_search
from pruning.search_space import SPACES, SubnetConfig, largest_config


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model-dir", default=sm_default("SM_CHANNEL_MODEL", None), help="super-network folder")
    parser.add_argument("--output-dir", default=sm_default("SM_OUTPUT_DATA_DIR", "out/search"))
    parser.add_argument("--search-space", choices=SPACES, default=None, help="default: the training space")
    parser.add_argument("--searcher", choices=SEARCHERS, default="morea")
    parser.add_argument("--num-samples", type=int, default=100)
    parser.add_argument(
        "--objectives", default="validation_error,num_parameters", help=f"comma-separated, from {OBJECTIVES}"
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--max-length", type=int, default=None, help="default: the training max length")
    parser.add_argument("--latency-batch-size", type=int, default=8)
    parser.add_argument(
        "--latency-repeats", type=int, default=10, help="per trial; 0: no latency_ms (e.g. with the macs objective)"
    )
    parser.add_argument(
        "--final-latency-repeats",
        type=int,
        default=30,
        help="re-times the front and the unpruned network, interleaved, as latency_ms_final (0: skip)",
    )
    parser.add_argument("--no-test-rescore", action="store_true", help="skip re-scoring the front on test")
    add_data_arguments(parser, split_from_metadata=True)
    add_runtime_arguments(parser)
    args = parser.parse_args(argv)
    try:
        args.objectives = list(parse_objectives(args.objectives))
    except ValueError as error:
        parser.error(str(error))
    if not args.model_dir:
        parser.error("--model-dir (or SM_CHANNEL_MODEL) is required")
    resolve_split(args, supernet_metadata(args.model_dir))
    return args


def main(argv=None) -> int:
    args = parse_args(argv)
    apply_runtime(args)
    from pruning.evaluation import evaluate_subnetwork, interleaved_latency_ms, latency_batch, mean_tokens
    from pruning.export import build_pruned_model
    from pruning.masks import model_dims
    from pruning.training import error_rate

    metadata = supernet_metadata(args.model_dir)
    space = args.search_space or metadata.get("search_space", "uniform")
    max_length = args.max_length or metadata.get("max_length", 128)
    splits = load_data(args)
    model, tokenizer = load_classifier(args.model_dir)
    dims = model_dims(model.config)
    timing = latency_batch(tokenizer, splits["validation"], args.latency_batch_size, max_length)
    tokens = mean_tokens(tokenizer, splits["validation"], max_length)
    cache: dict[SubnetConfig, dict] = {}

    def evaluate(subnet: SubnetConfig) -> dict:
        if subnet not in cache:  # e.g. 0 layers: every head/unit value is the same network
            cache[subnet] = evaluate_subnetwork(
                model,
                tokenizer,
                subnet,
                splits["validation"],
                max_length,
                timing if args.latency_repeats else None,
                repeats=args.latency_repeats,
                tokens=tokens,
            )
        return dict(cache[subnet])

    unpruned = {
        "subnet": largest_config(dims).to_dict(),
        **evaluate(largest_config(dims)),
        "validation_error_source": "search_subnetworks.py (full network, validation split)",
    }
    rows = run_search(
        evaluate,
        space,
        dims,
        args.searcher,
        args.num_samples,
        args.objectives,
        seed=args.seed,
        log=lambda message: print(message, flush=True),
    )
    output_dir = Path(args.output_dir)
    write_trials(rows, output_dir)
    summary = write_pareto(
        rows,
        args.objectives,
        unpruned,
        output_dir,
        title=f"{args.searcher} search, {space} space, {args.num_samples} samples",
        num_labels=model.config.num_labels,
    )
    if args.final_latency_repeats:
        members = [summary["unpruned"], *summary["pareto"]]
        networks = [build_pruned_model(model, SubnetConfig.from_dict(r["subnet"])) for r in members]
        for row, p50 in zip(members, interleaved_latency_ms(networks, timing, args.final_latency_repeats), strict=True):
            row["latency_ms_final"] = p50
        summary["macs_tokens"] = tokens
        (output_dir / PARETO_JSON).write_text(json.dumps(summary, indent=2))
    if not args.no_test_rescore:
        test = splits["test"]
        for row in summary["pareto"]:
            pruned = build_pruned_model(model, SubnetConfig.from_dict(row["subnet"]))
            row["test_error"] = error_rate(pruned, tokenizer, test, max_length)
        unpruned["test_error"] = error_rate(model, tokenizer, test, max_length)
        (output_dir / PARETO_JSON).write_text(json.dumps(summary, indent=2))
    print(
        f"hypervolume={summary['hypervolume']:.6f} (reference point {summary['reference_point']}); "
        f"{len(summary['pareto'])} sub-networks on the front; results in {output_dir}",
        flush=True,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
