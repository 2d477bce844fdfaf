"""Exports one sub-network of the Pareto set as a physically smaller Hugging Face model.

Pick it by --index in the size-sorted front (0 = smallest, -1 = largest), or as the smallest one (fewest
parameters, or lowest latency with --minimise latency_ms) with validation error at most --max-error
(absolute) or --max-error-increase above the unpruned network's measured validation error (pareto.json's
reference, else the super-network's own from nas_supernet.json; never the worst trial's).
The output folder loads with ``AutoModelForSequenceClassification.from_pretrained(dir,
trust_remote_code=True)`` (the flag only matters when layers differ from a plain BERT layout) and holds
the tokenizer, saved with the training max length, and ``nas_export.json``, read by the inference handler.
With --quantize dynamic_int8 the handler serves the Linear layers in int8 (``pruning.compress``); the export
re-measures the validation error of the int8 model when --data-dir (default $SM_CHANNEL_TRAINING, the
stack's export job has that channel) is given, on the super-network's split (nas_supernet.json), records
it in nas_export.json and logs it as the ``validation_error`` metric.

    python export_subnetwork.py --model-dir out/supernet --pareto-file out/search/pareto.json \\
        --max-error-increase 0.01 --output-dir out/export
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from pruning.cli import SPLIT_DEFAULTS, parse_settings, read_json, settings_parser, sm_default, supernet_metadata
from pruning.data import LABELS
from pruning.metrics import format_metrics
from pruning.pareto import select_from_front
from pruning.search_space import SubnetConfig
from pruning.settings import ExportSettings


def parse_args(argv=None) -> ExportSettings:
    parser = settings_parser(ExportSettings, __doc__)
    args = parse_settings(parser, ExportSettings, argv)
    if args.pareto_file is None and sm_default("SM_CHANNEL_PARETO", None):
        args.pareto_file = str(Path(sm_default("SM_CHANNEL_PARETO", "")) / "pareto.json")
    if not args.model_dir or not args.pareto_file:
        parser.error("--model-dir and --pareto-file are required")
    return args


def reference_error(summary: dict, metadata: dict) -> tuple[float, str]:
    """The unpruned network's measured validation error: pareto.json's reference, else the
    super-network's own (nas_supernet.json). Never the worst trial: that budget admits every member."""
    unpruned = summary.get("unpruned") or {}
    if unpruned.get("validation_error") is not None:
        return float(unpruned["validation_error"]), unpruned.get("validation_error_source", "pareto.json")
    if metadata.get("validation_error") is not None:
        return float(metadata["validation_error"]), "nas_supernet.json"
    raise SystemExit(
        "--max-error-increase needs the unpruned network's validation error: neither pareto.json nor the "
        "super-network's nas_supernet.json has one; give --max-error or --index"
    )


def choose(summary: dict, args, metadata: dict) -> tuple[dict, dict]:
    """(front member, how it was chosen)."""
    front = summary["pareto"]
    if args.index is not None:
        return select_from_front(front, index=args.index), {"index": args.index}
    how = {"minimise": args.minimise}
    max_error = args.max_error
    if max_error is None:
        error, source = reference_error(summary, metadata)
        max_error = error + args.max_error_increase
        how.update(reference_error=error, reference_source=source, max_error_increase=args.max_error_increase)
    how["max_error"] = max_error
    return select_from_front(front, max_error=max_error, minimise=args.minimise), how


def compression_check(args, pruned, tokenizer, metadata: dict, max_length: int) -> dict:
    """The quantization record of nas_export.json, with the error re-measured on the super-network's own
    validation split when --data-dir is given (the metadata's split, as for the trials)."""
    from pruning.compress import compare_logits, quantize_dynamic_int8

    record = {"method": args.quantize, "modules": ["Linear"], "dtype": "qint8"}
    if args.data_dir:
        from pruning.cli import load_data

        split = argparse.Namespace(data_dir=args.data_dir, max_rows=None)
        for name, value in SPLIT_DEFAULTS.items():
            setattr(split, name, metadata.get(name, value))
        validation = load_data(split)["validation"]
        record.update(compare_logits(pruned, quantize_dynamic_int8(pruned), tokenizer, validation, max_length))
        print(
            f"{args.quantize}: validation error {record['validation_error_fp32']:.4f} -> "
            f"{record['validation_error']:.4f}, largest logit difference {record['max_abs_logit_difference']:.4f}",
            flush=True,
        )
        # the export job's MetricDefinitions (pruning.metrics) read this line: the compressed model's error
        print(format_metrics(validation_error=record["validation_error"]), flush=True)
    return record


def main(argv=None) -> int:
    args = parse_args(argv)
    from pruning.cli import load_classifier
    from pruning.export import build_pruned_model, count_model_parameters, save_pruned_model

    summary = read_json(args.pareto_file)
    metadata = supernet_metadata(args.model_dir)
    chosen, how = choose(summary, args, metadata)
    subnet = SubnetConfig.from_dict(chosen["subnet"])
    model, tokenizer = load_classifier(args.model_dir)
    max_length = int(metadata.get("max_length", 128))
    pruned = build_pruned_model(model, subnet)
    num_parameters = count_model_parameters(pruned)
    if "num_parameters" in chosen and int(chosen["num_parameters"]) != num_parameters:
        raise RuntimeError(f"pruned model has {num_parameters} parameters, the front says {chosen['num_parameters']}")
    tokenizer.model_max_length = max_length
    export_metadata = {
        "subnet": subnet.to_dict(),
        "max_length": max_length,
        "labels": list(LABELS),
        "num_parameters": num_parameters,
        "base_model": metadata.get("base_model"),
        "selection": how,
        **{
            k: chosen[k]
            for k in ("validation_error", "test_error", "latency_ms", "macs", "latency_ms_final")
            if k in chosen
        },
    }
    if args.quantize != "none":
        export_metadata["quantization"] = compression_check(args, pruned, tokenizer, metadata, max_length)
    save_pruned_model(pruned, tokenizer, args.output_dir, export_metadata, args.inference_code_dir)
    print(f"exported {subnet.to_dict()} ({num_parameters} parameters) to {args.output_dir}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
