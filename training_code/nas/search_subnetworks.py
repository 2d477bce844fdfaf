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

import json
import sys
from pathlib import Path

from pruning.cli import (
    apply_runtime,
    defer_split_to_metadata,
    load_classifier,
    load_data,
    parse_settings,
    resolve_split,
    settings_parser,
    supernet_metadata,
)
from pruning.pareto import parse_objectives
from pruning.report import PARETO_JSON, write_pareto, write_trials
from pruning.search import run_search
from pruning.search_space import SubnetConfig, largest_config
from pruning.settings import SearchSettings


def parse_args(argv=None) -> SearchSettings:
    parser = settings_parser(SearchSettings, __doc__)
    defer_split_to_metadata(parser)
    args = parse_settings(parser, SearchSettings, argv)
    try:
        parse_objectives(args.objectives)
    except ValueError as error:
        parser.error(str(error))
    if not args.model_dir:
        parser.error("--model-dir (or SM_CHANNEL_MODEL) is required")
    resolve_split(args, supernet_metadata(args.model_dir))
    return args


def retime_front(summary: dict, model, timing, repeats: int) -> None:
    """latency_ms_final of the front and the unpruned network, timed interleaved round by round on one batch."""
    from pruning.evaluation import interleaved_latency_ms
    from pruning.export import build_pruned_model

    members = [summary["unpruned"], *summary["pareto"]]
    networks = [build_pruned_model(model, SubnetConfig.from_dict(r["subnet"])) for r in members]
    for row, p50 in zip(members, interleaved_latency_ms(networks, timing, repeats), strict=True):
        row["latency_ms_final"] = p50


def rescore_front_on_test(summary: dict, model, tokenizer, test: list, max_length: int) -> None:
    """test_error of each front member and of the unpruned network (the search saw validation rows only)."""
    from pruning.export import build_pruned_model
    from pruning.training import error_rate

    for row in summary["pareto"]:
        pruned = build_pruned_model(model, SubnetConfig.from_dict(row["subnet"]))
        row["test_error"] = error_rate(pruned, tokenizer, test, max_length)
    summary["unpruned"]["test_error"] = error_rate(model, tokenizer, test, max_length)


def refine_front(args: SearchSettings, summary: dict, networks: tuple, test: list, measured: dict, output_dir: Path):
    """Re-times the front (--final-latency-repeats) and re-scores it on test (unless --no-test-rescore), rewriting
    pareto.json after each; `measured` holds the search's timing batch, mean tokens and max length."""
    model, tokenizer = networks
    if args.final_latency_repeats:
        retime_front(summary, model, measured["timing"], args.final_latency_repeats)
        summary["macs_tokens"] = measured["tokens"]
        (output_dir / PARETO_JSON).write_text(json.dumps(summary, indent=2))
    if not args.no_test_rescore:
        rescore_front_on_test(summary, model, tokenizer, test, measured["max_length"])
        (output_dir / PARETO_JSON).write_text(json.dumps(summary, indent=2))


def main(argv=None) -> int:
    args = parse_args(argv)
    apply_runtime(args)
    from pruning.evaluation import evaluate_subnetwork, latency_batch, mean_tokens
    from pruning.masks import model_dims

    objectives = list(parse_objectives(args.objectives))
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
            latency, repeats = (timing if args.latency_repeats else None), args.latency_repeats
            cache[subnet] = evaluate_subnetwork(
                model, tokenizer, subnet, splits["validation"], max_length, latency, repeats=repeats, tokens=tokens
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
        objectives,
        seed=args.seed,
        log=lambda message: print(message, flush=True),
    )
    output_dir = Path(args.output_dir)
    write_trials(rows, output_dir)
    summary = write_pareto(
        rows,
        objectives,
        unpruned,
        output_dir,
        title=f"{args.searcher} search, {space} space, {args.num_samples} samples",
        num_labels=model.config.num_labels,
    )
    measured = {"timing": timing, "tokens": tokens, "max_length": max_length}
    refine_front(args, summary, (model, tokenizer), splits["test"], measured, output_dir)
    print(
        f"hypervolume={summary['hypervolume']:.6f} (reference point {summary['reference_point']}); "
        f"{len(summary['pareto'])} sub-networks on the front; results in {output_dir}",
        flush=True,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
