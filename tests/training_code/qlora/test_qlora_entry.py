"""Entry-point rules: what the model folder says it is, safe resume, SIGTERM, one-line errors, eval options."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from finetune.card import MODEL_KIND_FILE
from finetune.templates import LLAMA2_CHAT_TEMPLATE
from qlora_test_helpers import QLORA_DIR, instruction_rows, load_train_entry, tiny_run_args, write_jsonl

ENV = {**os.environ, "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1"}


pytestmark = pytest.mark.slow


def run(argv: list[str]) -> dict:
    return load_train_entry().main(argv)


@pytest.fixture(scope="module")
def data(tmp_path_factory) -> Path:
    return write_jsonl(tmp_path_factory.mktemp("data") / "train.jsonl", instruction_rows(48))


@pytest.fixture(scope="module")
def adapter_run(tiny_llama, data, tmp_path_factory) -> tuple[dict, list[str], Path]:
    """One --no-merge run from a base without a model card (license unknown): its report, argv and output folder."""
    (tiny_llama / "README.md").unlink(missing_ok=True)
    out = tmp_path_factory.mktemp("adapter_run") / "out"
    argv = tiny_run_args(tiny_llama, data, out, "--max_steps", "1", "--no-merge", "--no-resume")
    return run(argv), argv, out


def test_no_merge_leaves_an_adapter_marked_not_servable(tiny_llama, adapter_run):
    report, _, out = adapter_run
    model_dir = out / "model"
    assert json.loads((model_dir / MODEL_KIND_FILE).read_text()) == {
        "kind": "adapter",
        "servable": False,
        "base_model": str(tiny_llama),
    }
    assert (model_dir / "adapter_config.json").is_file() and report["model_kind"] == "adapter"


def test_merged_model_is_marked_servable_with_card_and_the_training_chat_template(tiny_llama, data, tmp_path):
    from transformers import AutoTokenizer

    (tiny_llama / "README.md").write_text("---\nlicense: llama2\n---\n# base\n")  # as hub model cards start
    run(tiny_run_args(tiny_llama, data, tmp_path / "out", "--max_steps", "1", "--eval_fraction", "0.1"))
    model_dir = tmp_path / "out" / "model"
    assert json.loads((model_dir / MODEL_KIND_FILE).read_text())["kind"] == "merged"
    card = (model_dir / "README.md").read_text()
    assert card.startswith('---\nlicense: "llama2"\nbase_model: ') and "eval_loss" in card and "| lora_r | 8 |" in card
    assert AutoTokenizer.from_pretrained(tiny_llama).chat_template is None  # the base had none ...
    assert AutoTokenizer.from_pretrained(model_dir).chat_template == LLAMA2_CHAT_TEMPLATE  # ... the served one has


def test_a_rerun_into_the_same_model_dir_rereads_the_card_as_peft_does(tiny_llama, adapter_run):
    from huggingface_hub import ModelCard

    _, argv, out = adapter_run  # its base had no card: license unknown
    card = ModelCard.load(out / "model" / "README.md")
    assert card.data.license == "unknown" and card.data.base_model == str(tiny_llama)
    (tiny_llama / "README.md").unlink(missing_ok=True)  # the rerun's base has no card either, whatever ran between
    run(argv)  # PEFT's save_pretrained updates the README it finds: it must parse


def test_resume_skips_an_incomplete_newest_checkpoint(tiny_llama, data, tmp_path):
    argv = tiny_run_args(tiny_llama, data, tmp_path / "out", "--save_steps", "2", "--no-merge")
    run([*argv, "--max_steps", "4"])
    checkpoints = tmp_path / "out" / "checkpoints"
    (checkpoints / "checkpoint-4" / "trainer_state.json").write_text('{"truncated')  # a save cut short
    (checkpoints / "checkpoint-6").mkdir()  # a folder created, then the instance went away
    report = run([*argv, "--max_steps", "6"])
    assert report["resumed_from"] == str(checkpoints / "checkpoint-2")
    assert [item["checkpoint"].rsplit("/", 1)[-1] for item in report["skipped_checkpoints"]] == [
        "checkpoint-6",
        "checkpoint-4",
    ]
    assert [point["step"] for point in report["loss_curve"]["train"]][-1] == 6


def test_sigterm_mid_run_saves_a_checkpoint_that_a_rerun_resumes(tiny_llama, data, tmp_path):
    argv = [
        sys.executable,
        str(QLORA_DIR / "train.py"),
        *tiny_run_args(tiny_llama, data, tmp_path / "out", "--save_steps", "100000", "--no-merge"),
    ]
    process = subprocess.Popen(
        [*argv, "--max_steps", "500"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=ENV
    )
    output = []
    for line in process.stdout:
        output.append(line)
        if line.startswith("step=3 "):
            process.send_signal(signal.SIGTERM)
    assert process.wait(timeout=300) == 143, "".join(output[-20:])
    saved = [path.name for path in (tmp_path / "out" / "checkpoints").iterdir()]
    assert len(saved) == 1 and saved[0].startswith("checkpoint-")
    step = int(saved[0].split("-")[1])
    assert 3 <= step < 500 and any("SIGTERM" in line for line in output)
    report = run([*argv[2:], "--max_steps", str(step + 2)])
    assert report["resumed_from"] == str(tmp_path / "out" / "checkpoints" / saved[0])
    assert report["throughput"]["train_tokens"] > 0 and report["loss_curve"]["train"][-1]["step"] == step + 2


def test_a_layer_bitsandbytes_cannot_quantize_on_cpu_fails_early_in_one_line(tmp_path, data):
    import torch
    from finetune.tiny import build_tiny_llama
    from qlora_test_helpers import vocab_texts

    if torch.cuda.is_available():
        pytest.skip("the CPU kernels' limit")
    odd = build_tiny_llama(
        tmp_path / "odd", vocab_texts(), vocab_size=320, hidden_size=96, num_heads=4, intermediate_size=128
    )
    with pytest.raises(SystemExit) as error:
        run(tiny_run_args(odd, data, tmp_path / "out", "--max_steps", "1"))
    message = str(error.value.code)
    assert message == (
        "train.py: error: layer model.layers.0.self_attn.q_proj: in_features 96 is not a multiple of "
        "64, which 4-bit bitsandbytes needs on CPU; train on a GPU or pass --method lora"
    )


def test_data_errors_end_the_run_in_one_line(tiny_llama, tmp_path):
    bad = write_jsonl(tmp_path / "bad.jsonl", [{"messages": [{"role": "user", "content": "hi"}]}])
    with pytest.raises(SystemExit) as error:
        run(tiny_run_args(tiny_llama, bad, tmp_path / "out", "--max_steps", "1"))
    assert str(error.value.code) == (
        f"train.py: error: {bad}: row 1: field 'messages': no assistant message to learn from"
    )


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--eval_fraction", "0"], "error: --eval_fraction 0 without --eval_data: every run is evaluated on held-out"),
        (["--min_eval_rows", "0"], "error: --min_eval_rows and --eval_max_new_tokens must be >= 1"),
        (["--load_best_model"], "--load_best_model needs --eval_steps > 0"),
        (
            ["--early_stopping_patience", "2", "--eval_fraction", "0.1"],
            "--early_stopping_patience needs --eval_steps > 0",
        ),
        (
            ["--load_best_model", "--eval_fraction", "0.1", "--eval_steps", "3", "--save_steps", "4"],
            "needs --save_steps (4) to be a multiple of --eval_steps (3)",
        ),
    ],
)
def test_eval_options_need_periodic_evaluation(flags, message, capsys):
    from finetune.args import parse_args

    with pytest.raises(SystemExit):
        parse_args(["--model_id", "m", "--train_data", "d", "--output_dir", "o", *flags], env={})
    assert message in capsys.readouterr().err


def test_early_stopping_ends_with_the_best_checkpoint(tiny_llama, data, tmp_path):
    report = run(
        tiny_run_args(
            tiny_llama,
            data,
            tmp_path / "out",
            "--max_steps",
            "12",
            "--eval_fraction",
            "0.2",
            "--eval_steps",
            "2",
            "--save_steps",
            "2",
            "--early_stopping_patience",
            "1",
            "--learning_rate",
            "30",
            "--no-merge",
        )
    )
    evaluations = report["loss_curve"]["eval"][:-1]  # the last entry is the final evaluation of the kept model
    best = min(evaluations, key=lambda point: point["eval_loss"])
    assert report["loss_curve"]["train"][-1]["step"] < 12  # stopped: eval_loss rose at lr 30
    assert report["best_checkpoint"].endswith(f"checkpoint-{best['step']}")
    assert report["eval_metrics"]["eval_loss"] == pytest.approx(best["eval_loss"], rel=1e-5)
