"""Computes the Pareto set of finished sub-network trials (e.g. a SageMaker tuning job's trials).

Reads trial results (see ``pruning.results`` for the accepted forms), writes pareto.json (front sorted by
size, hypervolume, reference point), trials.json/.csv and pareto_front.png to --output-dir. Needs no torch.

The unpruned model is the reference of the export's error budget and normalises parameters and latency
for the hypervolume: its validation error is --unpruned-json's (an ``evaluation.json`` of the full
network), else the super-network's own measured error from --model-dir's ``nas_supernet.json``, else a
completed full-network trial; never the worst trial. Parameter counts are recomputed from each trial's
configuration and config.json (SageMaker metrics are 32-bit floats: 108,311,810 arrives as 108,311,808).

    python select_pareto.py --trials results/ --model-dir out/supernet --output-dir out/pareto
"""

from __future__ import annotations

import sys
from pathlib import Path

from pruning.cli import parse_settings, read_json, settings_parser, supernet_metadata
from pruning.params import EncoderShape, count_macs, count_parameters
from pruning.pareto import OBJECTIVES, parse_objectives
from pruning.report import write_pareto, write_trials
from pruning.results import complete_rows, read_trials
from pruning.search_space import ModelDims, largest_config
from pruning.settings import ParetoSettings


def parse_args(argv=None) -> ParetoSettings:
    parser = settings_parser(ParetoSettings, __doc__)
    args = parse_settings(parser, ParetoSettings, argv)
    try:
        parse_objectives(args.objectives)
    except ValueError as error:
        parser.error(str(error))
    if not args.trials:
        parser.error("--trials (or SM_CHANNEL_TRIALS) is required")
    return args


def full_network_trial(rows: list[dict], dims: ModelDims | None) -> dict | None:
    """A completed trial of the largest configuration (a fixed full-network trial), if the job had one."""
    if dims is None:
        return None
    largest = largest_config(dims).to_dict()
    return next((r for r in rows if r.get("status") == "completed" and r.get("subnet") == largest), None)


def unpruned_reference(args, rows: list[dict], config: dict | None, metadata: dict) -> dict:
    """The full network's objectives: the error budget of the export is relative to its validation error.

    That error is measured, never inferred from the trials: --unpruned-json, else the super-network's own
    validation error (``nas_supernet.json``, written by train_supernetwork.py on the same split), else a
    completed full-network trial; without any of them the reference has no error and an export with
    --max-error-increase refuses to pick. Parameters come from config.json; a latency missing from the
    reference is normalised by the largest measured one (it only scales the hypervolume)."""
    if args.unpruned_json:
        reference = read_json(args.unpruned_json)
        reference = {k: v for k, v in reference.items() if k in (*OBJECTIVES, "subnet")}
        reference["validation_error_source"] = "unpruned-json"
        return reference
    dims = ModelDims.from_config(config) if config is not None else None
    reference: dict = {}
    trial = full_network_trial(rows, dims)
    if trial is not None:
        reference.update({k: trial[k] for k in OBJECTIVES if trial.get(k) is not None})
        reference["validation_error_source"] = f"full-network trial {trial['trial_id']}"
    if metadata.get("validation_error") is not None:
        reference["validation_error"] = float(metadata["validation_error"])
        reference["validation_error_source"] = "nas_supernet.json"
    if config is not None:
        shape, largest = EncoderShape.from_config(config), largest_config(dims)
        reference["subnet"] = largest.to_dict()
        reference["num_parameters"] = count_parameters(shape, largest)
        tokens = next((r["macs_tokens"] for r in rows if r.get("macs_tokens")), None)
        if tokens is not None:  # the full network's MACs at the length the trials were counted at
            reference["macs"] = count_macs(shape, largest, tokens)
    done = [r for r in rows if r.get("status") == "completed"]
    for name in parse_objectives(args.objectives):
        if name not in reference and name != "validation_error":
            reference[name] = max(float(r[name]) for r in done)
    return reference


def read_model_dir(model_dir: str | None) -> tuple[dict | None, dict]:
    """(config.json, nas_supernet.json) of the super-network folder; (None, {}) where absent."""
    if not model_dir or not (Path(model_dir) / "config.json").exists():
        return None, {}
    return read_json(Path(model_dir) / "config.json"), supernet_metadata(model_dir)


def main(argv=None) -> int:
    args = parse_args(argv)
    config, metadata = read_model_dir(args.model_dir)
    space = args.search_space or metadata.get("search_space", "uniform")
    dims = ModelDims.from_config(config) if config is not None else None
    shape = EncoderShape.from_config(config) if config is not None else None
    objectives = list(parse_objectives(args.objectives))
    rows = complete_rows(read_trials(args.trials), space, dims, objectives, shape)
    if not any(r.get("status") == "completed" for r in rows):
        raise SystemExit("no completed trial with all objectives")
    unpruned = unpruned_reference(args, rows, config, metadata)
    output_dir = Path(args.output_dir)
    write_trials(rows, output_dir)
    summary = write_pareto(
        rows,
        objectives,
        unpruned,
        output_dir,
        title="Pareto front of the trials",
        mark_unpruned="validation_error" in unpruned,
        num_labels=shape.num_labels if shape else 2,
    )
    source = unpruned.get("validation_error_source", "none: pass --unpruned-json or a --model-dir")
    print(
        f"hypervolume={summary['hypervolume']:.6f}; {len(summary['pareto'])} of {len(rows)} trials on the "
        f"front ({summary['num_failed']} failed); reference error from {source}; results in {output_dir}",
        flush=True,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
