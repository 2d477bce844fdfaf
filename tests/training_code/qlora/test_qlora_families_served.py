"""Two families besides Llama through the local chain: train.py (QLoRA on CPU), merge, model_facts.json, and real
vLLM serving the merged folder, answered through the `openai` client. Qwen3 has a head tied to its embedding (in
the targets, as config/local.yaml asks for the head), Phi-3 fused qkv_proj and gate_up_proj projections."""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path

import pytest
import torch
from finetune.families import build_tiny_family
from qlora_test_helpers import instruction_rows, load_train_entry, tiny_run_args, vocab_texts, write_jsonl

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("vllm")]

TARGETS = {"qwen3": "auto,lm_head", "phi3": "auto"}


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict[str, dict]:
    """Each family built, trained 6 steps and merged by train.py in this process: {family: report, paths, stdout}."""
    work = tmp_path_factory.mktemp("families")
    data = write_jsonl(work / "train.jsonl", instruction_rows(48))
    runs = {}
    for family, targets in TARGETS.items():
        base = build_tiny_family(work / family / "base", family, vocab_texts(), vocab_size=320)
        argv = tiny_run_args(base, data, work / family / "out", "--max_steps", "6", "--target_modules", targets)
        stdout = io.StringIO()
        with contextlib.redirect_stdout(stdout):
            report = load_train_entry().main(argv)
        runs[family] = {"report": report, "base": base, "out": work / family / "out", "stdout": stdout.getvalue()}
    return runs


def test_the_tied_head_is_trained_as_one_lora_and_merged_once(runs):
    from peft import PeftModel
    from transformers import AutoModelForCausalLM

    run = runs["qwen3"]
    assert run["report"]["tied_targets"] == ["lm_head"]
    assert (
        "LoRA target lm_head: the output head shares the input embedding's weight; one LoRA on that shared weight "
        "serves both (peft ensure_weight_tying) and the merge adds it once"
    ) in run["stdout"]
    assert run["report"]["merge"]["check"]["passed"]
    ids = torch.tensor([[1, 40, 41, 42, 43, 44, 45, 46, 47, 48]])
    with torch.no_grad():
        base = AutoModelForCausalLM.from_pretrained(run["base"], dtype=torch.float16)
        base_logits = base(ids).logits.float()
        adapted_logits = PeftModel.from_pretrained(base, run["out"] / "adapter")(ids).logits.float()
        merged = AutoModelForCausalLM.from_pretrained(run["out"] / "model")
        merged_logits = merged(ids).logits.float()
    assert merged.config.tie_word_embeddings and merged.lm_head.weight is merged.model.embed_tokens.weight
    gap = (merged_logits - adapted_logits).abs().max()
    assert (adapted_logits - base_logits).abs().max() > 20 * gap and gap <= 1e-2 * adapted_logits.abs().max()


def test_phi3s_fused_projections_are_trained(runs):
    from safetensors.torch import load_file

    assert runs["phi3"]["report"]["target_modules"] == ["down_proj", "gate_up_proj", "o_proj", "qkv_proj"]
    trained = {key.split(".")[-3] for key in load_file(runs["phi3"]["out"] / "adapter" / "adapter_model.safetensors")}
    assert trained == {"down_proj", "gate_up_proj", "o_proj", "qkv_proj"}


@pytest.mark.parametrize("family", TARGETS)
def test_the_facts_are_the_merged_configs_as_transformers_builds_it(runs, family):
    from transformers import AutoConfig, AutoModelForCausalLM

    model_dir = runs[family]["out"] / "model"
    facts = json.loads((model_dir / "model_facts.json").read_text(encoding="utf-8"))
    config = AutoConfig.from_pretrained(model_dir)
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(config)
    assert facts["parameters"] == sum(p.numel() for p in model.parameters())  # a tied weight counted once
    assert (facts["model_type"], facts["architecture"]) == (config.model_type, type(model).__name__)
    assert facts["num_attention_heads"] == config.num_attention_heads
    assert facts["num_key_value_heads"] == config.num_key_value_heads
    assert facts["context_length"] == config.max_position_embeddings and facts["chat_template"]


@pytest.mark.parametrize("family", TARGETS)
def test_real_vllm_answers_as_transformers_computes_the_merged_model(runs, family, tmp_path):
    """vLLM's log-probability of each answer token equals transformers' within float32 rounding: a family vLLM
    loaded differently (a norm, a fused projection or the tied head misread) would differ by far more."""
    from transformers import AutoTokenizer

    from local.servers.vllm_answers import MAX_TOKENS, ask_vllm, logprob_gap

    model_dir: Path = runs[family]["out"] / "model"
    answer = ask_vllm(model_dir, tmp_path / "vllm.log", served_name=family)
    assert len(answer.token_ids) == MAX_TOKENS
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    assert answer.text == tokenizer.decode(answer.token_ids, skip_special_tokens=True)
    assert logprob_gap(model_dir, answer) < 1e-3
