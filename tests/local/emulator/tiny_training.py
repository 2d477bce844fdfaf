"""The training runs the emulator tests start: train.py's step count and sizes cut so a job takes seconds, and the
24 instruction rows they upload (and build the tiny base's tokenizer from).

The held-out evaluation keeps every row for its losses (the quality gate's eval_loss_improvement) but generates
one short answer per model instead of five of 64 tokens: no test here reads the ROUGE-L score, and greedy
generation on the 4-bit base was most of a job's compute."""

from __future__ import annotations

import json

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
ROWS = [json.dumps({"instruction": f"What is item {i}?", "response": f"Item {i} is a thing."}) for i in range(24)]
