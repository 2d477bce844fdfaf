"""The training runs the emulator tests start: train.py's step count and sizes cut so a job takes seconds, and the
24 instruction rows they upload (and build the tiny base's tokenizer from).

The held-out evaluation keeps every row for its losses (the quality gate's eval_loss_improvement) but generates
one short answer per model instead of five of 64 tokens: no test here reads the ROUGE-L score, and greedy
generation on the 4-bit base was most of a job's compute."""

from __future__ import annotations

import json
from pathlib import Path

import yaml

FAST = {
    "max_steps": "2",
    "lora_r": "8",
    "lora_alpha": "16",
    "per_device_batch_size": "4",
    "logging_steps": "1",
    "max_seq_length": "64",
    "eval_generations": "1",
    "eval_max_new_tokens": "8",
}
RECORDS = Path(__file__).resolve().parents[3] / "config" / "models"
ROWS = [json.dumps({"instruction": f"What is item {i}?", "response": f"Item {i} is a thing."}) for i in range(24)]


def recorded_base(out_dir: Path, texts: list[str] = ROWS, vocab_size: int = 300) -> Path:
    """A tiny random-init Llama of the local environment's base record (config/models/tiny-pretrained.yaml: the
    shape of finetune/pretrain.py's base), tokenizer trained on `texts`: what a run checks its `model` channel
    against (finetune/base_record.py) before training on it."""
    from finetune.tiny import build_tiny_llama

    record = yaml.safe_load(
        (Path(__file__).resolve().parents[3] / "config" / "models" / "tiny-pretrained.yaml").read_text()
    )
    return build_tiny_llama(
        out_dir,
        texts,
        vocab_size=vocab_size,
        hidden_size=record["hidden_size"],
        num_layers=record["num_hidden_layers"],
        num_heads=record["num_attention_heads"],
        intermediate_size=record["intermediate_size"],
        max_position_embeddings=record["context_length"],
        model_vocab_size=record["vocab_size"],
    )
