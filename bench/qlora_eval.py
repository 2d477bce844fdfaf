"""Held-out evaluation on the shipped data: base vs merged eval loss, against a run that cannot learn.

    .venv/bin/python bench/qlora_eval.py [--max-steps 300] [--workdir /tmp/qlora_eval] [--json bench/qlora_eval.json]

The base is the tiny pretrained Llama that `make demo` builds (finetune.pretrain, cached under build/pretrained);
the data is data/instructions.jsonl; train.py runs with the demo's flags (local/demo.py TRAIN_FLAGS, copied
here: tools/ is not imported by benchmarks) and its default hold-out (10 % of the distinct rows). Two arms,
same flags, same seed, so the same held-out rows and tokens: `trained` (the demo's learning rate) and the
naive baseline `lr0` (--learning_rate 0: the merged model is the base, so its improvement must be ~0). The
figures are read from each run's evaluation.json. The real-token share of packing is measured on the same
data at max_seq_length 128 over one epoch of the Trainer's batches (bench/qlora_steps.py's sampler and our
collator), default packing against the seed's unpacked batches. Not a test: it takes minutes.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
QLORA = ROOT / "training_code" / "qlora"
sys.path[:0] = [str(QLORA), str(ROOT / "data"), str(ROOT / "bench")]

DATA = ROOT / "data" / "instructions.jsonl"
LORA_TARGETS = "q_proj,k_proj,v_proj,o_proj,gate_proj,up_proj,down_proj,lm_head"
TRAIN_FLAGS = [
    "--max_seq_length", "128", "--per_device_batch_size", "8", "--lora_r", "64", "--lora_alpha", "128",
    "--lora_dropout", "0.05", "--target_modules", LORA_TARGETS, "--compute_dtype", "float32",
    "--logging_steps", "10", "--save_steps", "100000", "--no-gradient_checkpointing", "--no-resume",
]  # fmt: skip
ARMS = {"trained": "3e-3", "lr0": "0"}


def run_arm(base: Path, workdir: Path, name: str, learning_rate: str, max_steps: int) -> dict:
    out = workdir / name
    argv = [
        sys.executable,
        str(QLORA / "train.py"),
        "--model_id",
        str(base),
        "--train_data",
        str(DATA),
        "--output_dir",
        str(out),
        "--max_steps",
        str(max_steps),
        "--learning_rate",
        learning_rate,
        *TRAIN_FLAGS,
    ]
    started = time.perf_counter()
    result = subprocess.run(argv, capture_output=True, text=True, env={**os.environ, "OMP_NUM_THREADS": "1"})
    if result.returncode:
        raise SystemExit(f"{name}: train.py failed\n{result.stdout[-2000:]}{result.stderr[-2000:]}")
    evaluation = json.loads((out / "model" / "evaluation.json").read_text(encoding="utf-8"))
    report = json.loads((out / "training_report.json").read_text(encoding="utf-8"))
    return {
        "learning_rate": learning_rate,
        "seconds": round(time.perf_counter() - started, 1),
        "base": evaluation["base"],
        "merged": evaluation["merged"],
        "eval_loss_improvement": evaluation["eval_loss_improvement"],
        "merged_over_base_eval_loss": evaluation["merged"]["eval_loss"] / evaluation["base"]["eval_loss"],
        "source": evaluation["source"],
        "rows": evaluation["rows"],
        "tokens": evaluation["tokens"],
        "eval_split": {key: report["data"]["eval"].get(key) for key in ("distinct_rows", "duplicate_rows")},
        "final_train_loss": report["loss_curve"]["train"][-1]["loss"],
        "generations": evaluation["generations"][:2],
    }


def real_token_share(base: Path, batch: int, flags: list[str]) -> dict:
    """Real tokens / processed positions over one epoch of the Trainer's batches (sampler + collator)."""
    import torch
    from finetune.model import load_tokenizer
    from qlora_steps import batch_loader, prepared_examples, real_tokens, recipe_args

    args = recipe_args(base, DATA, 128, batch, flags)
    tokenizer = load_tokenizer(str(base))
    examples, summary = prepared_examples(args, tokenizer)
    real = positions = 0
    for collated in batch_loader(args, examples, tokenizer.pad_token_id, torch.cuda.is_available()):
        real += real_tokens(collated)
        positions += collated["input_ids"].numel()
    return {
        "real_token_share": round(real / positions, 4),
        "real_tokens": real,
        "positions": positions,
        "pack_length": summary["pack_length"],
    }


def main() -> None:
    import torch
    from finetune.pretrain import PretrainSettings, ensure_pretrained_base

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--max-steps", type=int, default=300, help="QLoRA optimizer steps (the demo's)")
    parser.add_argument("--cache", default=str(ROOT / "build" / "pretrained"))
    parser.add_argument("--workdir", default="/tmp/qlora_eval")
    parser.add_argument("--json", help="also write the figures here")
    args = parser.parse_args()
    torch.set_num_threads(1)
    base = ensure_pretrained_base(Path(args.cache).resolve(), settings=PretrainSettings(steps=300))
    workdir = Path(args.workdir)
    summary: dict = {
        "base_model": "finetune.pretrain tiny Llama (300 steps, as make demo)",
        "data": str(DATA.name),
        "max_steps": args.max_steps,
        "arms": {},
    }
    for name, learning_rate in ARMS.items():
        summary["arms"][name] = run_arm(base, workdir, name, learning_rate, args.max_steps)
        print(json.dumps({name: summary["arms"][name]}, indent=2), flush=True)
    trained, control = summary["arms"]["trained"], summary["arms"]["lr0"]
    assert trained["tokens"] == control["tokens"], "the arms must score the same held-out tokens"
    recipes = {"default (packing)": [], "seed (no packing, group_by_length)": ["--no-packing"]}
    summary["packing"] = {
        f"{name}, batch {batch}": real_token_share(base, batch, flags)
        for batch in (4, 8)
        for name, flags in recipes.items()
    }
    summary["load_average_1m_at_end"] = os.getloadavg()[0]
    print(json.dumps(summary["packing"], indent=2), flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
