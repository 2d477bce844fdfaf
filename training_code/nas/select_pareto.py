"""Computes the Pareto set of finished sub-network trials (e.g. a SageMaker tuning job's trials).

Reads trial results (see ``nas_results`` for the accepted forms), writes pareto.json (front sorted by
size, hypervolume, reference point), trials.json/.csv and pareto_front.png to --output-dir. Needs no torch.

The unpruned model normalises parameters and latency for the hypervolume: give --unpruned-json (an
``evaluation.json`` of the full network), or --model-dir (its parameter count is computed from
config.json); failing both, the largest trial stands in and the plot has no unpruned marker.

    python select_pareto.py --trials results/ --model-dir out/supernet --output-dir out/pareto
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from nas_cli import read_json, sm_default
from nas_params import EncoderShape, count_parameters
from nas_pareto import OBJECTIVES
from nas_report import write_pareto, write_trials
from nas_results import complete_rows, read_trials
from nas_search_space import SPACES, ModelDims, largest_config


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--trials",
        default=sm_default("SM_CHANNEL_TRIALS", None),
        help="results file or folder ($SM_CHANNEL_TRIALS)",
    )
    parser.add_argument("--output-dir", default=sm_default("SM_OUTPUT_DATA_DIR", "out/pareto"))
    parser.add_argument(
        "--model-dir",
        default=sm_default("SM_CHANNEL_MODEL", None),
        help="super-network folder (config.json, nas_supernet.json)",
    )
    parser.add_argument("--unpruned-json", default=None, help="metrics of the unpruned model")
    parser.add_argument("--search-space", choices=SPACES, default=None)
    parser.add_argument("--objectives", default="validation_error,num_parameters")
    args = parser.parse_args(argv)
    args.objectives = tuple(o.strip() for o in args.objectives.split(",") if o.strip())
    if set(args.objectives) - set(OBJECTIVES) or "validation_error" not in args.objectives:
        parser.error(f"--objectives needs validation_error and one more of {OBJECTIVES}")
    if not args.trials:
        parser.error("--trials (or SM_CHANNEL_TRIALS) is required")
    return args


def unpruned_reference(args, rows: list[dict], config: dict | None) -> dict:
    if args.unpruned_json:
        reference = read_json(args.unpruned_json)
        return {k: v for k, v in reference.items() if k in (*OBJECTIVES, "subnet")}
    reference = {}
    if config is not None:
        dims = ModelDims(
            config["num_hidden_layers"], config["num_attention_heads"], config["intermediate_size"]
        )
        reference["num_parameters"] = count_parameters(EncoderShape.from_config(config), largest_config(dims))
    done = [r for r in rows if r.get("status") == "completed"]
    for name in args.objectives:
        if name not in reference:
            reference[name] = max(float(r[name]) for r in done)
    return reference


def main(argv=None) -> int:
    args = parse_args(argv)
    config, metadata = None, {}
    if args.model_dir and (Path(args.model_dir) / "config.json").exists():
        config = read_json(Path(args.model_dir) / "config.json")
        if (Path(args.model_dir) / "nas_supernet.json").exists():
            metadata = read_json(Path(args.model_dir) / "nas_supernet.json")
    space = args.search_space or metadata.get("search_space", "uniform")
    dims = None
    if config is not None:
        dims = ModelDims(
            config["num_hidden_layers"], config["num_attention_heads"], config["intermediate_size"]
        )
    rows = complete_rows(read_trials(args.trials), space, dims, args.objectives)
    if not any(r.get("status") == "completed" for r in rows):
        raise SystemExit("no completed trial with all objectives")
    unpruned = unpruned_reference(args, rows, config)
    output_dir = Path(args.output_dir)
    write_trials(rows, output_dir)
    summary = write_pareto(
        rows,
        list(args.objectives),
        unpruned,
        output_dir,
        title="Pareto front of the trials",
        mark_unpruned=args.unpruned_json is not None and "validation_error" in unpruned,
    )
    print(
        f"hypervolume={summary['hypervolume']:.6f}; {len(summary['pareto'])} of {len(rows)} trials on the "
        f"front ({summary['num_failed']} failed); results in {output_dir}",
        flush=True,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
