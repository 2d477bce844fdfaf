"""Peak memory and throughput of QLoRA vs LoRA (bf16 base) vs full fine-tuning, and of our batching vs the seed's.

A ~100M-parameter Llama (random init, tokenizer trained offline) runs the same few steps through the real
entry point, training_code/qlora/train.py, once per mode, each in its own process so that each peak RSS is
its own. Figures come from each run's training_report.json; ratios are taken within this one invocation.

    .venv/bin/python bench/qlora_memory.py [--steps 4] [--workdir /tmp/qlora_bench] [--json results.json]

On a GPU the same command measures GPU memory (torch.cuda.max_memory_reserved, in each mode's own process) and
GPU speed; on CPU, RSS and CPU speed (bitsandbytes dequantizes every 4-bit weight on every step there).
Not a test: it takes minutes, and its figures depend on the machine and on what else runs on it.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
QLORA_DIR = ROOT / "training_code" / "qlora"
sys.path[:0] = [str(QLORA_DIR), str(ROOT / "bench")]

# ~97M parameters: 12 layers of 7.1M (hidden 768, MLP 2048) + 2 x 6.1M for embeddings and head (vocab 8000).
MODEL_SHAPE = {"hidden_size": 768, "num_layers": 12, "num_heads": 12, "intermediate_size": 2048}
MODEL_VOCAB = 8000
TOKENIZER_VOCAB = 4000

# name -> extra train.py flags. The first three differ only in what is trained (LoRA's frozen base in bf16, the
# compute dtype, as a 16-bit LoRA run holds it); "seed" is the seed notebook's batching (no packing,
# group_by_length) in the same dtype as our default, so the comparison is not bf16 against fp16.
MODES: dict[str, list[str]] = {
    "qlora": [],
    "lora": ["--method", "lora"],
    "full": ["--method", "full"],
    "seed": ["--no-packing", "--group_by_length"],
}


def synthetic_rows(count: int, seed: int = 0) -> list[dict[str, str]]:
    """guanaco-llama2-like rows: short prompts, long-tailed answer lengths, in the `text` column's format."""
    rng = random.Random(seed)
    letters = "abcdefghijklmnopqrstuvwxyz"
    words = ["".join(rng.choice(letters) for _ in range(rng.randint(2, 9))) for _ in range(3000)]

    def sentence(length: int) -> str:
        return " ".join(rng.choice(words) for _ in range(length))

    rows = []
    for _ in range(count):
        answer_words = int(min(400, max(5, rng.lognormvariate(math.log(80), 0.8))))
        rows.append({"text": f"<s>[INST] {sentence(rng.randint(5, 40))} [/INST] {sentence(answer_words)} </s>"})
    return rows


def build_inputs(workdir: Path) -> tuple[Path, Path]:
    from finetune.tiny import build_tiny_llama

    data = workdir / "train.jsonl"
    model = workdir / "model"
    if not data.exists():
        data.write_text("".join(json.dumps(row) + "\n" for row in synthetic_rows(400)), encoding="utf-8")
    if not (model / "config.json").exists():
        texts = [row["text"] for row in synthetic_rows(400)]
        build_tiny_llama(
            model,
            texts,
            vocab_size=TOKENIZER_VOCAB,
            model_vocab_size=MODEL_VOCAB,
            max_position_embeddings=1024,
            **MODEL_SHAPE,
        )
    return model, data


def run_mode(name: str, model: Path, data: Path, workdir: Path, steps: int, seq_len: int, threads: int) -> dict:
    out = workdir / f"run_{name}"
    argv = [
        sys.executable,
        str(QLORA_DIR / "train.py"),
        "--model_id",
        str(model),
        "--train_data",
        str(data),
        "--output_dir",
        str(out),
        "--max_steps",
        str(steps),
        "--per_device_batch_size",
        "4",
        "--max_seq_length",
        str(seq_len),
        "--logging_steps",
        "1",
        "--save_steps",
        "100000",
        "--no-merge",
        "--no-resume",
        *MODES[name],
    ]
    started = time.perf_counter()
    env = {**os.environ, "OMP_NUM_THREADS": str(threads), "MKL_NUM_THREADS": str(threads)}
    result = subprocess.run(argv, capture_output=True, text=True, check=False, env=env)
    if result.returncode != 0:
        raise RuntimeError(f"{name} failed:\n{result.stderr[-3000:]}")
    report = json.loads((out / "training_report.json").read_text())
    throughput = report["throughput"]
    return {
        "mode": name,
        "flags": " ".join(MODES[name]) or "(defaults)",
        "peak_rss_gb": report["peak_memory_gb"]["total"]["rss"],
        "peak_gpu_reserved_gb": report["peak_memory_gb"]["total"].get("gpu_reserved"),  # None on CPU
        "peak_rss_after_load_gb": report["peak_memory_gb"]["load"]["rss"],
        "base_weights_gb": report["base_weights_gb"],
        "linear_weights_gb": report["linear_weights_gb"],
        "tokens_per_second": throughput["tokens_per_second"],
        "tokens_per_second_after_first_step": throughput["tokens_per_second_after_first_step"],
        "tokens_per_cpu_second_after_first_step": throughput["tokens_per_cpu_second_after_first_step"],
        "train_tokens": throughput["train_tokens"],
        "trainable_parameters": report["parameters"]["trainable"],
        "total_parameters": report["parameters"]["total"],
        "final_loss": report["loss_curve"]["train"][-1]["loss"],
        "wall_seconds": round(time.perf_counter() - started, 1),
    }


def interleaved(model: Path, data: Path, rounds: int, seq_len: int, threads: int) -> dict[str, dict]:
    """All modes in one process, one step each per round, the order rotating every round."""
    import torch
    from qlora_steps import RecipeRunner, interleave

    torch.set_num_threads(threads)
    return interleave({name: RecipeRunner(model, data, seq_len, 4, MODES[name]) for name in MODES}, rounds)


def interleaved_ratios(figures: dict[str, dict]) -> dict[str, float]:
    pairs = [("qlora", "full"), ("lora", "full"), ("qlora", "lora"), ("qlora", "seed")]
    return {
        f"tokens/s {a}/{b}": round(figures[a]["tokens_per_second"] / figures[b]["tokens_per_second"], 3)
        for a, b in pairs
    }


def ratios(results: dict[str, dict]) -> dict[str, float]:
    """Memory ratios, and speed ratios per CPU second (robust to other load) and per wall second."""

    def ratio(a: str, b: str, key: str) -> float:
        return round(results[a][key] / results[b][key], 3)

    found = {
        "base_weights qlora/lora": ratio("qlora", "lora", "base_weights_gb"),
        "quantized_linear_weights qlora/lora": ratio("qlora", "lora", "linear_weights_gb"),
        "peak_rss qlora/full": ratio("qlora", "full", "peak_rss_gb"),
        "peak_rss lora/full": ratio("lora", "full", "peak_rss_gb"),
        "peak_rss qlora/lora": ratio("qlora", "lora", "peak_rss_gb"),
    }
    pairs = [("qlora", "full"), ("lora", "full"), ("qlora", "lora"), ("qlora", "seed")]
    for a, b in pairs:
        found[f"tokens/cpu-s {a}/{b}"] = ratio(a, b, "tokens_per_cpu_second_after_first_step")
        found[f"tokens/s {a}/{b}"] = ratio(a, b, "tokens_per_second_after_first_step")
    return found


def markdown(results: dict[str, dict]) -> str:
    lines = [
        "| mode | flags | base weights GB | peak RSS GB | tokens/s | tokens/s after step 1 | tokens/CPU-s after "
        "step 1 | trainable params |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for row in results.values():
        lines.append(
            f"| {row['mode']} | `{row['flags']}` | {row['base_weights_gb']:.3f} | {row['peak_rss_gb']:.2f} | "
            f"{row['tokens_per_second']:.0f} | {row['tokens_per_second_after_first_step']:.0f} | "
            f"{row['tokens_per_cpu_second_after_first_step']:.0f} | {row['trainable_parameters']:,} |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=4, help="optimizer steps per mode (batch 4)")
    parser.add_argument("--seq_len", type=int, default=256)
    parser.add_argument("--workdir", default="/tmp/qlora_bench")
    parser.add_argument("--modes", default=",".join(MODES), help="modes run as separate processes ('' for none)")
    parser.add_argument("--json", help="also write the figures here")
    parser.add_argument(
        "--interleaved_rounds",
        type=int,
        default=5,
        help="steps per mode of the in-process interleaved speed comparison (0: skip)",
    )
    parser.add_argument(
        "--threads",
        type=int,
        default=1,
        help="torch threads per run; 1 because spinning OpenMP threads crawl on a busy shared CPU",
    )
    args = parser.parse_args()
    workdir = Path(args.workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    model, data = build_inputs(workdir)
    results = {}
    for name in filter(None, args.modes.split(",")):
        results[name] = run_mode(name, model, data, workdir, args.steps, args.seq_len, args.threads)
        print(json.dumps(results[name]), flush=True)
    summary = {
        "machine": {"cpus": os.cpu_count(), "threads": args.threads, "load_average_1m_at_end": os.getloadavg()[0]},
        "steps": args.steps,
        "seq_len": args.seq_len,
        "batch": 4,
        "results": results,
        "ratios": ratios(results) if set(MODES) <= set(results) else {},
        "note": "ratios of tokens/s use the figures after step 1; each mode ran in its own process, in turn",
    }
    print(markdown(results))
    print(json.dumps(summary["ratios"], indent=2))
    if args.interleaved_rounds > 1:
        figures = interleaved(model, data, args.interleaved_rounds, args.seq_len, args.threads)
        summary["interleaved"] = {
            "rounds": args.interleaved_rounds,
            "figures": figures,
            "ratios": interleaved_ratios(figures),
        }
        print(json.dumps(summary["interleaved"], indent=2))
    if args.json:
        Path(args.json).write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
