"""Token efficiency and tokens/s of the default recipe vs the seed recipe, on dolly-shaped instruction data.

    .venv/bin/python bench/qlora_tokens.py [--rows 2000] [--rounds 6] [--workdir /tmp/qlora_tokens] [--json out]

- Token efficiency: the share of processed positions that are real tokens (not padding) over one epoch of
  batches, exactly as the Trainer would form them (same sampler, collator and padding), at batch 4 and 8.
- Speed: both recipes in one process, in the same compute dtype, one optimizer step each per round in rotating
  order (the first step of each dropped), on the model's device. Real tokens per second; the ratio is what counts.
Seed recipe: no packing, group_by_length, pad to the batch's longest row. Default: best-fit packing to the
automatic pack length with reset position_ids, group_by_length. Runs on a GPU when there is one; on CPU, the
speed figures are CPU figures (bitsandbytes dequantizes every 4-bit weight on every step there).
Not a test: it takes minutes and its absolute figures depend on the machine.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "training_code" / "qlora"), str(ROOT / "data"), str(ROOT / "bench")]

from make_dolly_shaped import dolly_shaped_rows  # noqa: E402
from qlora_steps import RecipeRunner, batch_loader, interleave, prepared_examples, real_tokens, recipe_args  # noqa: E402

RECIPES = {"seed": ["--no-packing", "--group_by_length"], "default": []}
SEQ_LEN = 1536  # the longest rendered row is ~1,500 tokens: nothing is truncated on either side
# A model whose linear layers dominate the attention cost per token as in a 7B model's at these lengths.
MODEL_SHAPE = {"hidden_size": 512, "num_layers": 4, "num_heads": 8, "intermediate_size": 1408}


def build_inputs(workdir: Path, rows: int) -> tuple[Path, Path]:
    from finetune.tiny import build_tiny_llama

    data, model = workdir / "train.jsonl", workdir / "model"
    generated = dolly_shaped_rows(rows)
    data.write_text("".join(json.dumps(row) + "\n" for row in generated), encoding="utf-8")
    if not (model / "config.json").exists():
        texts = [value for row in generated[:500] for value in row.values()]
        build_tiny_llama(model, texts, vocab_size=4000, max_position_embeddings=2048, **MODEL_SHAPE)
    return model, data


def efficiency(model: Path, data: Path, batch: int, flags: list[str], gpu: bool) -> dict:
    from finetune.model import load_tokenizer

    args = recipe_args(model, data, SEQ_LEN, batch, flags)
    tokenizer = load_tokenizer(args.model_id)
    examples, summary = prepared_examples(args, tokenizer)
    real = positions = batches = 0
    for collated in batch_loader(args, examples, tokenizer.pad_token_id, gpu):
        real += real_tokens(collated)
        positions += collated["input_ids"].numel()
        batches += 1
    return {
        "real_token_share": round(real / positions, 4),
        "batches": batches,
        "real_tokens": real,
        "positions": positions,
        "pack_length": summary["pack_length"],
        "dropped": summary["train"]["dropped_too_long"],
    }


def length_profile(model: Path, data: Path) -> dict:
    from finetune.model import load_tokenizer

    args = recipe_args(model, data, SEQ_LEN, 4, ["--no-packing"])
    lengths = sorted(len(example["input_ids"]) for example in prepared_examples(args, load_tokenizer(str(model)))[0])
    return {
        "rows": len(lengths),
        "min": lengths[0],
        "median": statistics.median(lengths),
        "p90": lengths[int(0.9 * len(lengths))],
        "max": lengths[-1],
    }


def main() -> None:
    import torch

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=6, help="interleaved steps per recipe (0: skip speed)")
    parser.add_argument("--speed_batch", type=int, default=4)
    parser.add_argument("--threads", type=int, default=1, help="torch threads on CPU")
    parser.add_argument("--workdir", default="/tmp/qlora_tokens")
    parser.add_argument("--json", help="also write the figures here")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    workdir = Path(args.workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    model, data = build_inputs(workdir, args.rows)
    gpu = torch.cuda.is_available()
    summary: dict = {
        "device": torch.cuda.get_device_name() if gpu else f"cpu ({os.cpu_count()} cores)",
        "lengths": length_profile(model, data),
        "efficiency": {},
    }
    for batch in (4, 8):
        for name, flags in RECIPES.items():
            summary["efficiency"][f"{name} batch {batch}"] = efficiency(model, data, batch, flags, gpu)
    print(json.dumps(summary, indent=2), flush=True)
    if args.rounds > 1:
        runners = {name: RecipeRunner(model, data, SEQ_LEN, args.speed_batch, flags) for name, flags in RECIPES.items()}
        speed = interleave(runners, args.rounds)
        summary["speed"] = {
            "compute_dtype": "bfloat16 (both)",
            "batch": args.speed_batch,
            "rounds": args.rounds,
            "figures": speed,
            "tokens/s default/seed": round(
                speed["default"]["tokens_per_second"] / speed["seed"]["tokens_per_second"], 3
            ),
            "scope": "GPU figures" if gpu else "CPU-only figures (bitsandbytes dequantizes on CPU)",
        }
        if gpu:
            summary["speed"]["max_memory_reserved_gb"] = round(torch.cuda.max_memory_reserved() / 1024**3, 3)
        print(json.dumps(summary["speed"], indent=2), flush=True)
    summary["load_average_1m_at_end"] = os.getloadavg()[0]
    if args.json:
        Path(args.json).write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
