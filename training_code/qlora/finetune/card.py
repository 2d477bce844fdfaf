"""What the model folder holds, for people (README.md model card) and for the workflow (model_kind.json).

model_kind.json says whether the folder is a servable merged model or an adapter that still needs its base,
so that nothing downstream records an adapter (`--no-merge`) as the model to serve.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

MODEL_KIND_FILE = "model_kind.json"
CARD_FILE = "README.md"
CARD_HYPERPARAMETERS = (
    "method", "epochs", "max_steps", "learning_rate", "per_device_batch_size", "gradient_accumulation_steps",
    "max_seq_length", "packing", "train_on_inputs", "lora_r", "lora_alpha", "lora_dropout", "compute_dtype",
    "quant_type", "double_quant", "merge_dtype", "seed",
)  # fmt: skip


def write_model_kind(model_dir: str | Path, kind: str, base_model: str) -> Path:
    """kind: `merged` (servable), `full` (servable, full fine-tune) or `adapter` (needs `base_model`)."""
    path = Path(model_dir) / MODEL_KIND_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    record = {"kind": kind, "servable": kind != "adapter", "base_model": base_model}
    path.write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
    return path


def base_license(model_id: str) -> str:
    """The base's license: its config's `license`, else its model card's front matter, else unknown."""
    folder = Path(model_id)
    config = folder / "config.json"
    if config.is_file():
        found = json.loads(config.read_text(encoding="utf-8")).get("license")
        if found:
            return str(found)
    card = folder / CARD_FILE
    if card.is_file():
        match = re.search(r"^---\n(.*?)\n---", card.read_text(encoding="utf-8"), re.S)
        licence = re.search(r"^license:\s*(\S.*)$", match.group(1), re.M) if match else None
        if licence:
            return licence.group(1).strip().strip("'\"")
    return "unknown"


def _figure(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.4f}"


def evaluation_section(evaluation: dict[str, Any] | None) -> str:
    """The held-out figures of evaluation.json (finetune.evaluate), base vs merged on the same tokens."""
    if not evaluation:
        return "No held-out evaluation was recorded.\n"
    rows = "\n".join(
        f"| {side} | {_figure(evaluation[side]['eval_loss'])} | {_figure(evaluation[side]['perplexity'])} | "
        f"{_figure(evaluation[side]['rouge_l'])} |"
        for side in ("base", "merged")
    )
    return f"""Held-out evaluation ({evaluation["source"]}: {evaluation["rows"]} rows, {evaluation["tokens"]} supervised
tokens; {len(evaluation["generations"])} greedy generations scored with {evaluation["scorer"]}):

| model | eval loss (token-weighted) | perplexity | ROUGE-L |
| --- | --- | --- | --- |
{rows}

eval_loss_improvement (base - merged): {evaluation["eval_loss_improvement"]:.4f}. Full record: `evaluation.json`.
"""


def model_card(report: dict[str, Any], kind: str) -> str:
    arguments = report["arguments"]
    data = report.get("data", {})
    evaluation = report.get("eval_metrics") or {}
    rows = "\n".join(f"| {name} | {arguments.get(name)} |" for name in CARD_HYPERPARAMETERS if name in arguments)
    eval_line = (
        f"eval_loss {evaluation['eval_loss']:.4f} on {data.get('eval', {}).get('rows', 0)} rows"
        if "eval_loss" in evaluation
        else "no evaluation data"
    )
    licence = base_license(arguments["model_id"])
    # JSON strings are valid YAML: paths and ids with colons stay one value (PEFT re-reads this front matter).
    return f"""---
license: {json.dumps(licence)}
base_model: {json.dumps(arguments["model_id"])}
tags: [qlora, peft]
---

# Fine-tune of {arguments["model_id"]} ({kind})

- Training data: `{arguments.get("train_data")}` ({data.get("train", {}).get("rows", "?")} rows,
  format {data.get("train", {}).get("format", "?")}, {data.get("train", {}).get("supervised_tokens", "?")}
  supervised tokens); evaluation: {eval_line}.
- License: {licence if licence != "unknown" else "not found in the base's config or model card; check it"}.
- Chat template: {report.get("chat_template_source", "?")}; it is saved with the tokenizer.
- Loss on {"every token" if arguments.get("train_on_inputs") else "answers only (prompts masked)"}.

{evaluation_section(report.get("evaluation"))}
| hyperparameter | value |
| --- | --- |
{rows}

Full record: `training_report.json` in the job's output data.
"""


def write_model_card(model_dir: str | Path, report: dict[str, Any], kind: str) -> Path:
    path = Path(model_dir) / CARD_FILE
    path.write_text(model_card(report, kind), encoding="utf-8")
    return path
