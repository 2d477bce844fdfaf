"""The held-out evaluation of every run: the base and the tuned model on the same tokens.

Loss is token-weighted (summed cross-entropy over every supervised eval token / their count), as training
weighs it, not a mean of per-row or per-batch means. Greedy generations for the first few held-out prompts are
scored against their reference answers with ROUGE-L (the `rouge-score` package, F-measure). The record is
written as evaluation.json next to the model, so the workflow can gate and register it.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from .config import TrainConfig
from .data import IGNORE_INDEX, Tokenized

EVALUATION_FILE = "evaluation.json"
SCORER = "rouge-score 0.1.2 rougeL F-measure (default tokenizer, no stemming)"


def row_losses(model: Any, batch: dict[str, torch.Tensor]) -> torch.Tensor:
    """[rows, 2]: each row's summed next-token loss over its supervised tokens, and their count (float32)."""
    device = next(model.parameters()).device
    inputs = {k: v.to(device) if isinstance(v, torch.Tensor) else v for k, v in batch.items() if k != "labels"}
    logits = model(**inputs, use_cache=False).logits[:, :-1].float()
    labels = batch["labels"][:, 1:].to(device)
    losses = torch.nn.functional.cross_entropy(
        logits.transpose(1, 2), labels, ignore_index=IGNORE_INDEX, reduction="none"
    )
    return torch.stack([losses.sum(1), (labels != IGNORE_INDEX).sum(1).float()], dim=1)


def loss_and_perplexity(loss_sum: float, tokens: float) -> dict[str, float | None]:
    loss = loss_sum / tokens
    return {"eval_loss": loss, "perplexity": math.exp(loss) if loss < 700 else None}


@torch.no_grad()
def token_weighted_loss(model: Any, rows: list[Tokenized], pad_token_id: int, batch_size: int) -> tuple[float, int]:
    """(summed loss, supervised tokens) over unpacked rows, each attending to itself only."""
    from trl.trainer.sft_trainer import DataCollatorForLanguageModeling

    model.eval()
    collate = DataCollatorForLanguageModeling(pad_token_id=pad_token_id)
    total = torch.zeros(2, dtype=torch.float64)
    for start in range(0, len(rows), batch_size):
        batch = collate([{"input_ids": r.input_ids, "labels": r.labels} for r in rows[start : start + batch_size]])
        total += row_losses(model, batch).sum(0).double().cpu()
    return float(total[0]), int(total[1])


@dataclass
class HeldOutPrompt:
    prompt_ids: list[int]
    reference: str
    stop_id: int  # the answer's own last token: the template's end-of-turn token or EOS


def held_out_prompts(rows: list[Tokenized], tokenizer: Any, count: int) -> list[HeldOutPrompt]:
    """The first `count` rows with a real prompt before their first answer (text rows have none)."""
    special = set(tokenizer.all_special_ids)
    prompts = []
    for row in rows:
        answer = row.in_answer()
        first = next((i for i, inside in enumerate(answer) if inside), None)
        if first is None or all(i in special for i in row.input_ids[:first]):
            continue
        last = first
        while last + 1 < len(answer) and answer[last + 1]:
            last += 1
        reference = tokenizer.decode(row.input_ids[first : last + 1], skip_special_tokens=True).strip()
        prompts.append(HeldOutPrompt(row.input_ids[:first], reference, row.input_ids[last]))
        if len(prompts) == count:
            break
    return prompts


@torch.no_grad()
def greedy_answers(model: Any, tokenizer: Any, prompts: list[HeldOutPrompt], max_new_tokens: int) -> list[str]:
    model.eval()
    device = next(model.parameters()).device
    answers = []
    for prompt in prompts:
        ids = torch.tensor([prompt.prompt_ids], device=device)
        stops = sorted({prompt.stop_id, *([tokenizer.eos_token_id] if tokenizer.eos_token_id is not None else [])})
        generated = model.generate(
            input_ids=ids, attention_mask=torch.ones_like(ids), max_new_tokens=max_new_tokens, do_sample=False,
            eos_token_id=stops, pad_token_id=tokenizer.pad_token_id, top_p=None, top_k=None, temperature=None,
        )  # fmt: skip
        answers.append(tokenizer.decode(generated[0, ids.shape[1] :], skip_special_tokens=True).strip())
    return answers


def rouge_l(references: list[str], predictions: list[str]) -> list[float]:
    from rouge_score import rouge_scorer

    scorer = rouge_scorer.RougeScorer(["rougeL"])
    return [scorer.score(ref, pred)["rougeL"].fmeasure for ref, pred in zip(references, predictions, strict=True)]


def evaluate_model(model: Any, tokenizer: Any, rows: list[Tokenized], config: TrainConfig) -> dict[str, Any]:
    """Loss, perplexity, ROUGE-L and the generated answers of one model on the held-out rows."""
    loss_sum, tokens = token_weighted_loss(model, rows, tokenizer.pad_token_id, config.per_device_batch_size)
    prompts = held_out_prompts(rows, tokenizer, config.eval_generations)
    answers = greedy_answers(model, tokenizer, prompts, config.eval_max_new_tokens)
    scores = rouge_l([p.reference for p in prompts], answers)
    return {
        **loss_and_perplexity(loss_sum, tokens),
        "rouge_l": sum(scores) / len(scores) if scores else None,
        "tokens": tokens,
        "answers": answers,
        "scores": scores,
        "prompts": [tokenizer.decode(p.prompt_ids, skip_special_tokens=False) for p in prompts],
        "references": [p.reference for p in prompts],
    }


def evaluation_record(
    base: dict[str, Any], tuned: dict[str, Any], rows: int, source: str, notes: dict[str, Any]
) -> dict[str, Any]:
    """evaluation.json: both models' figures on the same held-out tokens and prompts."""
    figures = ("eval_loss", "perplexity", "rouge_l")
    generations = [
        {"prompt": prompt, "reference": reference, "base": b, "merged": m, "rouge_l_base": sb, "rouge_l_merged": sm}
        for prompt, reference, b, m, sb, sm in zip(
            base["prompts"], base["references"], base["answers"], tuned["answers"], base["scores"], tuned["scores"],
            strict=True)
    ]  # fmt: skip
    return {
        "source": source,
        "rows": rows,
        "tokens": base["tokens"],
        "base": {name: base[name] for name in figures},
        "merged": {name: tuned[name] for name in figures},
        "eval_loss_improvement": base["eval_loss"] - tuned["eval_loss"],
        "generations": generations,
        "scorer": SCORER,
        **notes,
    }


def metric_values(record: dict[str, Any]) -> dict[str, float | None]:
    """The record's figures under the metric names of finetune.metrics (one stdout line)."""
    values: dict[str, float | None] = {"eval_loss_improvement": record["eval_loss_improvement"]}
    names = {"eval_loss": "eval_loss", "perplexity": "eval_perplexity", "rouge_l": "eval_rouge_l"}
    for side in ("base", "merged"):
        for figure, name in names.items():
            values[f"{name}_{side}"] = record[side][figure]
    return values


def write_evaluation(model_dir: str | Path, record: dict[str, Any]) -> Path:
    path = Path(model_dir) / EVALUATION_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
    return path
