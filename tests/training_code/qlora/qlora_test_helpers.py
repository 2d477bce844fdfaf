"""Data builders and helpers for the QLoRA tests (prefixed module name: the NAS tests share the process)."""

from __future__ import annotations

import importlib.util
import json
import random
from pathlib import Path

QLORA_DIR = Path(__file__).resolve().parents[3] / "training_code" / "qlora"

WORDS = [
    "alpha",
    "beta",
    "gamma",
    "delta",
    "model",
    "train",
    "token",
    "llama",
    "adapter",
    "merge",
    "serve",
    "cloud",
    "stack",
    "data",
    "learn",
    "rate",
    "step",
    "loss",
    "inferentia",
    "neuron",
    "batch",
    "prompt",
    "answer",
    "question",
    "explain",
    "why",
    "how",
    "what",
]


def load_train_entry():
    """train.py under a unique module name: the NAS job's own train.py may share this test process."""
    spec = importlib.util.spec_from_file_location("qlora_train_entry", QLORA_DIR / "train.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _sentence(rng: random.Random, low: int, high: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(rng.randint(low, high)))


def instruction_rows(count: int, seed: int = 0) -> list[dict[str, str]]:
    rng = random.Random(seed)
    rows = []
    for index in range(count):
        row = {"instruction": f"explain {_sentence(rng, 2, 6)}", "response": _sentence(rng, 3, 25)}
        if index % 3 == 0:
            row["context"] = _sentence(rng, 2, 8)
        rows.append(row)
    return rows


def text_rows(count: int, seed: int = 1) -> list[dict[str, str]]:
    """guanaco-llama2 style rows: the `text` column is already in the Llama 2 [INST] format."""
    rng = random.Random(seed)
    return [{"text": f"<s>[INST] {_sentence(rng, 2, 8)} [/INST] {_sentence(rng, 3, 25)} </s>"} for _ in range(count)]


def write_jsonl(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return path


def vocab_texts() -> list[str]:
    return [value for row in instruction_rows(64) + text_rows(64) for value in row.values()]


def tiny_run_args(model: Path, data: Path, out: Path, *extra: str) -> list[str]:
    """Flags for a run of a few seconds: float32 compute keeps it fast and exactly reproducible on CPU.

    Held-out answers of 8 tokens instead of the default 64: the greedy generations of the base and the tuned model
    took most of a tiny run, and no test reads more than that there are answers and how they score.
    """
    return [
        "--model_id",
        str(model),
        "--train_data",
        str(data),
        "--output_dir",
        str(out),
        "--max_seq_length",
        "64",
        "--per_device_batch_size",
        "4",
        "--lora_r",
        "8",
        "--lora_alpha",
        "16",
        "--learning_rate",
        "1e-2",
        "--logging_steps",
        "1",
        "--compute_dtype",
        "float32",
        "--eval_max_new_tokens",
        "8",
        *extra,
    ]


def run_config(model: Path | str, data: Path | str = "train.jsonl", **fields):
    """The TrainConfig train.py parses from tiny_run_args, with `fields` replaced."""
    from dataclasses import replace

    from finetune.args import parse_args

    return replace(parse_args(tiny_run_args(Path(model), Path(data), Path("out")), env={}), **fields)


def data_config(data: Path | str, **fields):
    """The TrainConfig for finetune.data alone: every row trained on (no hold-out) unless `fields` ask for one."""
    return run_config("model", data, **{"eval_fraction": 0.0, "min_eval_rows": 1, **fields})
