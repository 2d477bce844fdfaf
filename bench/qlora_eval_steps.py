"""Train loss with and without evaluation during training: an evaluation must not change the steps after it.

    .venv/bin/python bench/qlora_eval_steps.py [--steps 8] [--workdir /tmp/qlora_eval_steps] [--json FILE]

A tiny random-init Llama (finetune.tiny, hidden 64, a tokenizer trained on data/instructions.jsonl) is trained
with train.py on data/instructions.jsonl, same seed and flags, once without evaluation during training and once
with `--eval_steps 2`, for --method qlora and lora. Evaluation changes no weight and draws no random number, so
each pair of train-loss curves must be identical; a gap that opens after step 2 is the evaluation changing the
model. Float32 compute, no LoRA dropout, CPU, one torch thread. Not a test: about a minute.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
QLORA = ROOT / "training_code" / "qlora"
sys.path.insert(0, str(QLORA))

DATA = ROOT / "data" / "instructions.jsonl"
FLAGS = [
    "--max_seq_length", "128", "--per_device_batch_size", "4", "--lora_r", "8", "--lora_alpha", "16",
    "--lora_dropout", "0", "--learning_rate", "1e-2", "--compute_dtype", "float32", "--logging_steps", "1",
    "--save_steps", "100000", "--no-resume", "--no-merge", "--eval_generations", "0", "--seed", "42",
]  # fmt: skip


def run_arm(model: Path, out: Path, method: str, eval_steps: int, steps: int) -> dict[str, list[float]]:
    argv = [sys.executable, str(QLORA / "train.py"), "--model_id", str(model), "--train_data", str(DATA)]
    argv += ["--output_dir", str(out), "--method", method, "--max_steps", str(steps)]
    argv += ["--eval_steps", str(eval_steps), *FLAGS]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1"}
    result = subprocess.run(argv, capture_output=True, text=True, env=env)
    if result.returncode:
        raise SystemExit(f"{method} eval_steps {eval_steps}: train.py failed\n{result.stderr[-3000:]}")
    report = json.loads((out / "training_report.json").read_text(encoding="utf-8"))
    return {
        "train_loss": [point["loss"] for point in report["loss_curve"]["train"]],
        "eval_loss": [point["eval_loss"] for point in report["loss_curve"]["eval"]],
        "final_eval_loss": report["eval_metrics"]["eval_loss"],
    }


def main() -> None:
    from finetune.tiny import build_tiny_llama, texts_from_file

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=8)
    parser.add_argument("--workdir", type=Path, default=Path("/tmp/qlora_eval_steps"))
    parser.add_argument("--json", type=Path, default=None, help="write the curves here")
    args = parser.parse_args()
    model = build_tiny_llama(args.workdir / "model", texts_from_file(str(DATA)), chat_template=True)
    results: dict[str, dict] = {}
    for method in ("qlora", "lora"):
        arms = {
            f"eval_steps {n}": run_arm(model, args.workdir / f"{method}_{n}", method, n, args.steps) for n in (0, 2)
        }
        plain, evaluated = arms["eval_steps 0"]["train_loss"], arms["eval_steps 2"]["train_loss"]
        gap = max(abs(a - b) for a, b in zip(plain, evaluated, strict=True))
        results[method] = {**arms, "max_abs_train_loss_gap": gap}
        for name, arm in arms.items():
            print(f"{method:5} {name}: train loss {' '.join(f'{v:.4f}' for v in arm['train_loss'])}")
        print(f"{method:5} largest train-loss gap {gap:.2e}", flush=True)
    if args.json:
        args.json.write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
