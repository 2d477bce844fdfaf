"""The pretrained tiny base, and what the demo's QLoRA fine-tune adds to it: answers in the dataset's words.

One shorter pretraining (fewer, shorter blocks than the demo's) and one fine-tune on all rows but a held-out
eighth, shared by the tests. A fine-tune that did nothing leaves the merged model equal to the base, and both
comparisons below fail.
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path

import pytest
from qlora_test_helpers import QLORA_DIR, load_train_entry, write_jsonl

ROOT = QLORA_DIR.parents[1]
DATA = ROOT / "data" / "instructions.jsonl"
PRETRAIN_STEPS, FINE_TUNE_STEPS = 120, 120


pytestmark = pytest.mark.slow


def load_demo():
    spec = importlib.util.spec_from_file_location("demo_under_test", ROOT / "local" / "demo.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def fast_settings():
    from finetune.pretrain import PretrainSettings

    return PretrainSettings(steps=PRETRAIN_STEPS, seq_len=64)


@contextmanager
def one_thread():
    """Session fixtures start before the module's one_torch_thread fixture: the same setting, for them."""
    import torch

    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(previous)


@pytest.fixture(scope="session")
def pretrained(tmp_path_factory) -> tuple[Path, Path]:
    from finetune.pretrain import ensure_pretrained_base

    root = tmp_path_factory.mktemp("pretrained")
    with one_thread():
        return root, ensure_pretrained_base(root, settings=fast_settings())


@pytest.fixture(scope="session")
def fine_tuned(pretrained, tmp_path_factory) -> tuple[Path, list[dict]]:
    """The merged model of the demo's train.py flags on 7/8 of the rows, and the held-out rows."""
    rows = [json.loads(line) for line in DATA.read_text(encoding="utf-8").splitlines()]
    held_out = rows[3::8]
    train_rows = [row for index, row in enumerate(rows) if index % 8 != 3]
    work = tmp_path_factory.mktemp("fine_tuned")
    argv = [
        "--model_id",
        str(pretrained[1]),
        "--train_data",
        str(write_jsonl(work / "train.jsonl", train_rows)),
        "--output_dir",
        str(work / "out"),
        "--max_steps",
        str(FINE_TUNE_STEPS),
        *load_demo().TRAIN_FLAGS,
        # train.py's own held-out answers (not read here) in 8 tokens, not 64: a tenth of the fixture's time
        "--eval_max_new_tokens",
        "8",
    ]
    with one_thread():
        load_train_entry().main(argv)
    return work / "out" / "model", held_out


def answer_loss(model_dir: Path, rows: list[dict]) -> float:
    """Mean loss per answer token (EOS included) of rows rendered as train.py renders them for this base."""
    import torch
    from finetune.format import instruction_conversation
    from finetune.rows import SourcedRow
    from finetune.templates import LLAMA2_CHAT_TEMPLATE, render
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32).eval()
    total = count = 0.0
    for number, row in enumerate(rows, start=1):
        messages = instruction_conversation(SourcedRow("held-out", number, row))
        prompt = render(tokenizer, LLAMA2_CHAT_TEMPLATE, messages[:1], generation_prompt=True)
        ids = tokenizer(render(tokenizer, LLAMA2_CHAT_TEMPLATE, messages), add_special_tokens=False)["input_ids"]
        labels = list(ids)
        answer_start = len(tokenizer(prompt, add_special_tokens=False)["input_ids"])
        labels[:answer_start] = [-100] * answer_start
        with torch.no_grad():
            loss = model(input_ids=torch.tensor([ids]), labels=torch.tensor([labels])).loss
        supervised = len(ids) - answer_start  # answer tokens and the EOS: the positions the mean loss ran over
        total, count = total + float(loss) * supervised, count + supervised
    return total / count


def greedy_answer(model_dir: Path, prompt: str, max_new_tokens: int = 60) -> str:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32).eval()
    ids = tokenizer(prompt, add_special_tokens=False, return_tensors="pt")["input_ids"]
    out = model.generate(
        ids,
        max_new_tokens=max_new_tokens,
        do_sample=False,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.eos_token_id,
    )
    return tokenizer.decode(out[0, ids.shape[1] :], skip_special_tokens=True)


def test_pretraining_learns_the_corpus_and_saves_a_plain_hf_folder(pretrained):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    report = json.loads((pretrained[1] / "pretrain_report.json").read_text())
    assert report["steps"] == PRETRAIN_STEPS
    assert report["eval_loss_after"] < report["eval_loss_before"] - 1.5, report
    assert (pretrained[1] / "model.safetensors").is_file()
    tokenizer = AutoTokenizer.from_pretrained(pretrained[1])
    assert not tokenizer.chat_template, "no template: train.py renders the data in the seed's Llama 2 format"
    config = AutoModelForCausalLM.from_pretrained(pretrained[1]).config
    assert config.hidden_size % 64 == 0 and config.intermediate_size % 64 == 0  # NF4 on CPU


def test_a_second_call_reuses_the_cache_and_other_settings_get_another_folder(pretrained):
    from dataclasses import replace

    from finetune.pretrain import DEFAULT_CORPUS, DEFAULT_INSTRUCTIONS, cache_key, ensure_pretrained_base

    started = time.perf_counter()
    assert ensure_pretrained_base(pretrained[0], settings=fast_settings()) == pretrained[1]
    assert time.perf_counter() - started < 2
    other = replace(fast_settings(), steps=PRETRAIN_STEPS + 1)
    assert cache_key(DEFAULT_CORPUS, DEFAULT_INSTRUCTIONS, other) not in pretrained[1].name


def test_fine_tuned_model_predicts_held_out_answers_far_better_than_the_base(pretrained, fine_tuned):
    model_dir, held_out = fine_tuned
    base_loss, tuned_loss = answer_loss(pretrained[1], held_out), answer_loss(model_dir, held_out)
    assert tuned_loss < 0.6 * base_loss, (base_loss, tuned_loss)


def test_fine_tuned_answer_to_the_seed_prompt_shares_more_words_with_the_dataset(pretrained, fine_tuned):
    demo = load_demo()
    rows = [json.loads(line) for line in DATA.read_text(encoding="utf-8").splitlines()]
    reference = demo.closest_row(demo.question_of(demo.SAMPLE_PROMPT), rows)["response"]
    base = demo.answer_overlap(greedy_answer(pretrained[1], demo.SAMPLE_PROMPT), reference)
    tuned = demo.answer_overlap(greedy_answer(fine_tuned[0], demo.SAMPLE_PROMPT), reference)
    assert tuned > base + 0.1, (base, tuned)


def test_cli_runs_standalone():
    result = subprocess.run(
        [sys.executable, "-m", "finetune.pretrain", "--help"], cwd=QLORA_DIR, capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0 and "--corpus" in result.stdout and "--seconds" in result.stdout
