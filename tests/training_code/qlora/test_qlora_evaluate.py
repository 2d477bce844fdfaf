"""The held-out evaluation of every run: token-weighted loss, base vs merged on the same tokens, evaluation.json.

Expected losses come from transformers' own loss (model(input_ids, labels=...).loss, a mean over one row's
supervised tokens) times that row's token count, row by row: not from finetune.evaluate.
"""

from __future__ import annotations

import contextlib
import io
import json
import re
from dataclasses import replace

import pytest
import torch
from finetune.args import parse_args
from finetune.data import prepare_data
from finetune.metrics import METRIC_DEFINITIONS
from qlora_test_helpers import data_config, instruction_rows, load_train_entry, run_config, tiny_run_args, write_jsonl


def hf_token_weighted_loss(model, rows) -> tuple[float, int]:
    total, tokens = 0.0, 0
    with torch.no_grad():
        for row in rows:
            count = sum(label != -100 for label in row.labels[1:])
            loss = model(input_ids=torch.tensor([row.input_ids]), labels=torch.tensor([row.labels])).loss
            total += loss.item() * count
            tokens += count
    return total / tokens, tokens


def _eval_rows(tokenizer, data, seed=42):
    config = data_config(data, packing=True, eval_fraction=0.1, min_eval_rows=8, seed=seed)
    return prepare_data(tokenizer, config, tokenizer.chat_template)


def test_trainer_eval_loss_is_summed_loss_over_label_tokens_not_a_mean_of_batch_means(tiny_chat_llama, tmp_path):
    from finetune.model import load_base_model, load_tokenizer
    from finetune.trainer import build_trainer

    tokenizer = load_tokenizer(str(tiny_chat_llama))
    rows = instruction_rows(40, seed=3)
    for index, row in enumerate(rows):  # very different answer lengths, so batch means differ from the token mean
        row["response"] = row["response"] if index % 2 else "ok"
    data = write_jsonl(tmp_path / "train.jsonl", rows)
    prepared = _eval_rows(tokenizer, data)
    args = parse_args(tiny_run_args(tiny_chat_llama, data, tmp_path / "out", "--per_device_batch_size", "1"))
    model = load_base_model(
        run_config(tiny_chat_llama, method="lora", double_quant=False, gradient_checkpointing=False, packing=True)
    )
    unpacked_config = data_config(data, packing=False, eval_fraction=0.1, min_eval_rows=8, seed=42)
    unpacked = prepare_data(tokenizer, unpacked_config, tokenizer.chat_template)
    trainer = build_trainer(model, replace(args, packing=False), unpacked, tokenizer, [])
    expected, tokens = hf_token_weighted_loss(model, unpacked.eval_rows)
    metrics = trainer.evaluate()
    assert metrics["eval_loss"] == pytest.approx(expected, rel=1e-5) and metrics["eval_label_tokens"] == tokens
    packed = build_trainer(model, args, prepared, tokenizer, [])
    assert packed.evaluate()["eval_loss"] == pytest.approx(expected, rel=1e-5)  # packing changes nothing


@pytest.fixture(scope="module")
def evaluated_run(tiny_chat_llama, tmp_path_factory):
    out = tmp_path_factory.mktemp("evaluated")
    data = write_jsonl(out / "train.jsonl", instruction_rows(48))
    stdout = io.StringIO()
    with contextlib.redirect_stdout(stdout):
        report = load_train_entry().main(
            tiny_run_args(tiny_chat_llama, data, out / "out", "--max_steps", "4", "--merge_dtype", "float32")
        )
    return report, data, out / "out" / "model", stdout.getvalue()


def test_base_and_merged_are_scored_on_the_same_held_out_tokens(evaluated_run, tiny_chat_llama):
    from finetune.model import load_tokenizer
    from transformers import AutoModelForCausalLM

    report, data, model_dir, _ = evaluated_run
    evaluation = json.loads((model_dir / "evaluation.json").read_text())
    tokenizer = load_tokenizer(str(tiny_chat_llama))
    tokenizer.chat_template = load_tokenizer(str(model_dir)).chat_template
    rows = _eval_rows(tokenizer, data).eval_rows
    for side, folder in (("base", tiny_chat_llama), ("merged", model_dir)):
        model = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32)
        loss, tokens = hf_token_weighted_loss(model, rows)
        assert evaluation[side]["eval_loss"] == pytest.approx(loss, rel=1e-4)
        assert evaluation[side]["perplexity"] == pytest.approx(torch.tensor(loss).exp().item(), rel=1e-4)
        assert evaluation["tokens"] == tokens
    assert evaluation["source"] == "split of the training data" and evaluation["rows"] == len(rows) == 8
    assert evaluation["eval_loss_improvement"] == pytest.approx(
        evaluation["base"]["eval_loss"] - evaluation["merged"]["eval_loss"]
    )
    assert report["evaluation"] == evaluation


def test_generations_are_scored_with_rouge_score(evaluated_run):
    from rouge_score import rouge_scorer

    _, _, model_dir, _ = evaluated_run
    evaluation = json.loads((model_dir / "evaluation.json").read_text())
    scorer = rouge_scorer.RougeScorer(["rougeL"])
    assert len(evaluation["generations"]) == 5
    for side in ("base", "merged"):
        scores = [scorer.score(g["reference"], g[side])["rougeL"].fmeasure for g in evaluation["generations"]]
        assert [g[f"rouge_l_{side}"] for g in evaluation["generations"]] == pytest.approx(scores)
        assert evaluation[side]["rouge_l"] == pytest.approx(sum(scores) / 5)
    first = evaluation["generations"][0]
    assert first["prompt"].endswith("<|assistant|>\n") and first["reference"]  # the tiny template's turn


def test_evaluation_is_logged_as_metric_lines_and_shown_on_the_card(evaluated_run):
    report, _, model_dir, stdout = evaluated_run
    evaluation = report["evaluation"]
    scraped = {d["Name"]: [float(v) for v in re.findall(d["Regex"], stdout)] for d in METRIC_DEFINITIONS}
    for side in ("base", "merged"):
        for figure, name in (
            ("eval_loss", "eval_loss"),
            ("perplexity", "eval_perplexity"),
            ("rouge_l", "eval_rouge_l"),
        ):
            assert scraped[f"{name}_{side}"] == pytest.approx([evaluation[side][figure]], rel=1e-5, abs=1e-6)
    assert scraped["eval_loss_improvement"] == pytest.approx([evaluation["eval_loss_improvement"]], abs=1e-5)
    card = (model_dir / "README.md").read_text()
    assert f"| base | {evaluation['base']['eval_loss']:.4f} | {evaluation['base']['perplexity']:.4f} |" in card
    assert f"| merged | {evaluation['merged']['eval_loss']:.4f} |" in card
    assert f"(base - merged): {evaluation['eval_loss_improvement']:.4f}" in card
