"""The training runs the emulator tests start: train.py's step count and sizes cut so a job takes seconds, and the
24 instruction rows they upload (and build the tiny base's tokenizer from)."""

from __future__ import annotations

import json

FAST = {
    "max_steps": "2",
    "lora_r": "8",
    "lora_alpha": "16",
    "per_device_batch_size": "4",
    "logging_steps": "1",
    "max_seq_length": "64",
}
ROWS = [json.dumps({"instruction": f"What is item {i}?", "response": f"Item {i} is a thing."}) for i in range(24)]
