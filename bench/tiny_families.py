"""Every tiny family through the local chain: build, QLoRA on CPU, merge, facts, served by real vLLM.

    .venv/bin/python bench/tiny_families.py [--families qwen3,phi3] [--max-steps 40] [--workdir /tmp/tiny_families]
        [--out bench/tiny_families]

Per family (training_code/qlora/finetune/families.py): a random-init tiny model with a tokenizer trained on
data/instructions.jsonl; train.py (the SageMaker entry) on that data with config/local.yaml's hyperparameters
(copied here: the bench reads no environment's YAML) but `--max_steps` and `--target_modules auto,lm_head`, the
setting that fits every family (config/local.yaml names Llama's layers, which Phi-3 lacks); the merged folder's
model_facts.json against what transformers builds from its config.json; then real vLLM (.venv-vllm) serves the
merged folder with the vllm_neuronx container's arguments and answers one chat question through the `openai`
client, its token log-probabilities compared with transformers' (local/servers/vllm_answers.py). Writes
<out>.json and <out>.md. Not a test: about 2-3 minutes per family on 2 shared cores.
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
sys.path[:0] = [str(QLORA), str(ROOT)]

DATA = ROOT / "data" / "instructions.jsonl"
TARGETS = "auto,lm_head"
# config/local.yaml training.hyperparameters, but max_steps and target_modules
TRAIN_FLAGS = [
    "--learning_rate", "0.003", "--per_device_batch_size", "8", "--max_seq_length", "128", "--lora_r", "64",
    "--lora_alpha", "128", "--lora_dropout", "0.05", "--compute_dtype", "float32", "--no-gradient_checkpointing",
    "--logging_steps", "10", "--save_steps", "1000", "--no-resume", "--target_modules", TARGETS,
]  # fmt: skip


def train(base: Path, out: Path, max_steps: int) -> tuple[dict, float]:
    """train.py in its own process, as a job runs it; (training_report.json, wall seconds)."""
    argv = [sys.executable, str(QLORA / "train.py"), "--model_id", str(base), "--train_data", str(DATA)]
    argv += ["--output_dir", str(out), "--max_steps", str(max_steps), *TRAIN_FLAGS]
    started = time.perf_counter()
    result = subprocess.run(argv, capture_output=True, text=True, env={**os.environ, "OMP_NUM_THREADS": "1"})
    seconds = time.perf_counter() - started
    (out / "train.log").write_text(result.stdout + result.stderr, encoding="utf-8")
    if result.returncode:
        raise SystemExit(f"{base.name}: train.py failed\n{result.stdout[-2000:]}{result.stderr[-2000:]}")
    return json.loads((out / "training_report.json").read_text(encoding="utf-8")), seconds


def config_facts(model_dir: Path) -> dict:
    """What transformers builds from the merged folder's config.json (meta device: no weights read)."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    config = AutoConfig.from_pretrained(model_dir)
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(config)
    return {
        "parameters": sum(p.numel() for p in model.parameters()),  # a tied weight is one parameter
        "model_type": config.model_type,
        "architecture": type(model).__name__,
        "context_length": config.max_position_embeddings,
        "num_attention_heads": config.num_attention_heads,
        "num_key_value_heads": config.num_key_value_heads,
        "tied": model.get_output_embeddings().weight is model.get_input_embeddings().weight,
    }


def run_family(family: str, workdir: Path, max_steps: int) -> dict:
    from finetune.families import FAMILIES, build_tiny_family
    from finetune.tiny import texts_from_file

    from local.servers.vllm_answers import ask_vllm, logprob_gap

    started = time.perf_counter()
    base = build_tiny_family(workdir / family / "base", family, texts_from_file(str(DATA)))
    build_s = time.perf_counter() - started
    report, train_wall_s = train(base, workdir / family / "out", max_steps)
    model_dir = workdir / family / "out" / "model"
    facts = json.loads((model_dir / "model_facts.json").read_text(encoding="utf-8"))
    expected = config_facts(model_dir)
    answer = ask_vllm(model_dir, workdir / family / "vllm.log", served_name=family)
    evaluation, durations, curve = report["evaluation"], report["durations_seconds"], report["loss_curve"]["train"]
    return {
        "family": family,
        "keeps": FAMILIES[family].keeps,
        "architecture": facts["architecture"],
        "parameters": facts["parameters"],
        "tied": expected["tied"],
        "facts_match_config": all(facts[key] == value for key, value in expected.items() if key != "tied"),
        "targets": report["target_modules"],
        "tied_targets": report["tied_targets"],
        "eval_loss_base": round(evaluation["base"]["eval_loss"], 3),
        "eval_loss_merged": round(evaluation["merged"]["eval_loss"], 3),
        "train_loss_first": curve[0]["loss"],
        "train_loss_last": curve[-1]["loss"],
        "merge_relative_diff": report["merge"]["check"]["relative_diff"],
        "vllm_answer": answer.text,
        "vllm_vs_transformers_max_logprob_gap": logprob_gap(model_dir, answer),
        "seconds": {
            "build": round(build_s, 1),
            "train_py": round(train_wall_s, 1),
            "train": durations["train"],
            "merge": durations["merge"],
            "vllm_start": round(answer.ready_s, 1),
            "vllm_answer": round(answer.answer_s, 2),
        },
    }


def markdown(rows: list[dict], max_steps: int) -> str:
    head = (
        "| family | shape kept | params | tied | LoRA targets | held-out loss base -> merged | train loss "
        f"(first -> last logged, {max_steps} steps) | merge rel. diff | vLLM answer (24 tokens, greedy) | max "
        "logprob gap vs transformers | train.py s (train / merge) | vLLM start s | answer s |\n" + "| --- " * 13 + "|\n"
    )
    lines = []
    for row in rows:
        seconds = row["seconds"]
        answer = json.dumps(row["vllm_answer"])[1:-1][:60].replace("|", "\\|")
        lines.append(
            f"| {row['family']} | {row['keeps']} | {row['parameters']:,} | {'yes' if row['tied'] else 'no'} | "
            f"{', '.join(row['targets'])} | {row['eval_loss_base']} -> {row['eval_loss_merged']} | "
            f"{row['train_loss_first']:.2f} -> {row['train_loss_last']:.2f} | {row['merge_relative_diff']:.1e} | "
            f"`{answer}` | {row['vllm_vs_transformers_max_logprob_gap']:.1e} | {seconds['train_py']} "
            f"({seconds['train']} / {seconds['merge']}) | {seconds['vllm_start']} | {seconds['vllm_answer']} |"
        )
    return head + "\n".join(lines) + "\n"


def main() -> None:
    from finetune.families import FAMILIES

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--families", default=",".join(FAMILIES))
    parser.add_argument("--max-steps", type=int, default=40)
    parser.add_argument("--workdir", type=Path, default=Path("/tmp/tiny_families"))
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "tiny_families")
    args = parser.parse_args()
    rows = []
    for family in args.families.split(","):
        rows.append(run_family(family, args.workdir, args.max_steps))
        print(json.dumps(rows[-1]), flush=True)
    args.out.with_suffix(".json").write_text(json.dumps(rows, indent=2) + "\n", encoding="utf-8")
    args.out.with_suffix(".md").write_text(markdown(rows, args.max_steps), encoding="utf-8")
    print(markdown(rows, args.max_steps))


if __name__ == "__main__":
    main()
