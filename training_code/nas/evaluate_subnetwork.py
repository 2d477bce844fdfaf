"""Evaluates one sub-network of a trained super-network: one SageMaker tuning-job trial.

The sub-network comes as hyperparameters whose names are ``pruning.search_space.parameter_specs`` (uniform:
``--num_layers --num_heads --num_units``; per_layer: ``--num_layers --num_heads_<i> --num_units_<i>``).
Prints ``num_parameters=...; validation_error=...; macs=...; latency_ms=...`` (MACs of one sequence of
the split's mean tokenized length: a deterministic latency objective) and writes ``evaluation.json`` (the
configuration and its metrics in one record) to --output-data-dir. The train/validation cut (--dataset,
--split-seed, --validation-fraction) is the one recorded in the super-network's ``nas_supernet.json``.

    python evaluate_subnetwork.py --model-dir out/supernet --data-dir sample_data --num_layers 3 \\
        --num_heads 6 --num_units 512
"""

from __future__ import annotations

import argparse
import sys
import tarfile
import tempfile
from dataclasses import asdict
from pathlib import Path

from pruning.cli import (
    apply_runtime,
    defer_split_to_metadata,
    load_data,
    read_json,
    resolve_split,
    settings_from,
    settings_parser,
    supernet_metadata,
    write_json,
)
from pruning.metrics import format_metrics
from pruning.search_space import ModelDims, config_from_hyperparameters, parameter_specs
from pruning.settings import TrialSettings

# bert-base-cased: only used to list the per_layer flags in --help when no --model-dir is readable.
HELP_DIMS = ModelDims(12, 12, 3072)


def base_parser() -> argparse.ArgumentParser:
    """The flags of every trial; parse_args adds the sub-network's, which depend on the space and the model."""
    parser = settings_parser(TrialSettings, None, add_help=False)
    defer_split_to_metadata(parser)
    return parser


def unpack_model_dir(model_dir: str) -> Path:
    """SageMaker hands a training job's output over as model.tar.gz; unpack it once."""
    folder = Path(model_dir)
    archive = folder / "model.tar.gz"
    if (folder / "config.json").exists() or not archive.exists():
        return folder
    target = Path(tempfile.mkdtemp(prefix="supernet-"))
    with tarfile.open(archive) as tar:
        tar.extractall(target, filter="data")
    return target


def model_dims_from(model_dir: Path | None) -> ModelDims:
    if model_dir is None or not (model_dir / "config.json").exists():
        return HELP_DIMS
    return ModelDims.from_config(read_json(model_dir / "config.json"))


def parse_args(argv=None) -> tuple[TrialSettings, ModelDims]:
    known, _ = base_parser().parse_known_args(argv)
    model_dir = unpack_model_dir(known.model_dir) if known.model_dir else None
    metadata = supernet_metadata(model_dir) if model_dir else {}
    space = known.search_space or metadata.get("search_space", "uniform")
    dims = model_dims_from(model_dir)
    parser = argparse.ArgumentParser(
        parents=[base_parser()], description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    group = parser.add_argument_group(f"sub-network ({space} space)")
    specs = parameter_specs(space, dims)
    for spec in specs:
        allowed = f"one of {list(spec.choices)}" if spec.is_categorical else f"{spec.low}..{spec.high}"
        group.add_argument(
            f"--{spec.name}",
            f"--{spec.name.replace('_', '-')}",
            dest=spec.name,
            type=int,
            required=True,
            help=allowed,
        )
    namespace = parser.parse_args(argv)
    args = settings_from(namespace, TrialSettings)
    args.model_dir, args.search_space = model_dir, space
    args.max_length = args.max_length or metadata.get("max_length", 128)
    args.subnetwork = {spec.name: getattr(namespace, spec.name) for spec in specs}
    resolve_split(args, metadata)
    return args, dims


def main(argv=None) -> int:
    args, dims = parse_args(argv)
    if args.model_dir is None:
        raise SystemExit("--model-dir (or SM_CHANNEL_MODEL) is required")
    apply_runtime(args)
    from pruning.cli import load_classifier
    from pruning.evaluation import evaluate_subnetwork, latency_batch, mean_tokens

    hyperparameters = args.subnetwork
    subnet = config_from_hyperparameters(args.search_space, hyperparameters, dims)
    pairs = load_data(args)[args.split]
    model, tokenizer = load_classifier(args.model_dir)
    timing = latency_batch(tokenizer, pairs, args.latency_batch_size, args.max_length)
    tokens = mean_tokens(tokenizer, pairs, args.max_length)
    metrics = evaluate_subnetwork(
        model, tokenizer, subnet, pairs, args.max_length, timing, repeats=args.latency_repeats, tokens=tokens
    )
    print(format_metrics(**metrics), flush=True)
    if args.output_data_dir:
        write_json(
            Path(args.output_data_dir) / "evaluation.json",
            {
                "hyperparameters": hyperparameters,
                "subnet": subnet.to_dict(),
                "split": args.split,
                "search_space": args.search_space,
                "dims": asdict(dims),
                "macs_tokens": tokens,
                **metrics,
            },
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
