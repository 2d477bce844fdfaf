"""End to end on a tiny random-init Llama: 4-bit training, metric lines, report, merge, resume."""

from __future__ import annotations

import contextlib
import io
import json
import re
from pathlib import Path

import pytest
import torch
from finetune.merge import MergeCheckError
from finetune.metrics import METRIC_DEFINITIONS
from qlora_test_helpers import instruction_rows, load_train_entry, text_rows, tiny_run_args, write_jsonl
from safetensors.torch import load_file
from transformers import TrainerCallback

pytestmark = pytest.mark.slow

LLAMA_LINEAR_LAYERS = ["down_proj", "gate_proj", "k_proj", "o_proj", "q_proj", "up_proj", "v_proj"]


def run_training(argv: list[str], callbacks: list | None = None) -> tuple[dict, str]:
    stdout = io.StringIO()
    with contextlib.redirect_stdout(stdout):
        report = load_train_entry().main(argv, extra_callbacks=callbacks)
    return report, stdout.getvalue()


@pytest.fixture(scope="module")
def merged_run(tiny_llama, tmp_path_factory):
    """Text-format data, 4 steps, evaluation, merge in the default fp16."""
    out = tmp_path_factory.mktemp("merged_run")
    data = write_jsonl(out / "train.jsonl", text_rows(48))
    report, stdout = run_training(
        tiny_run_args(tiny_llama, data, out / "out", "--max_steps", "4", "--save_steps", "2", "--eval_fraction", "0.1")
    )
    return report, out / "out", stdout


def test_report_records_what_ran(merged_run):
    report, out, _ = merged_run
    assert (out / "training_report.json").is_file()
    assert report["arguments"]["lora_r"] == 8 and report["versions"]["bitsandbytes"] != "not installed"
    assert report["target_modules"] == LLAMA_LINEAR_LAYERS
    assert 0 < report["parameters"]["trainable"] < report["parameters"]["total"]
    assert report["data"]["train"]["format"] == "text" and report["data"]["eval"]["rows"] > 0
    assert [point["step"] for point in report["loss_curve"]["train"]] == [1, 2, 3, 4]
    assert report["loss_curve"]["eval"] and report["eval_metrics"]["eval_loss"] > 0
    # 4 steps of 4 best-fit blocks of up to 64 real tokens each, padding not counted
    assert 0.9 * 4 * 4 * 64 <= report["throughput"]["train_tokens"] <= 4 * 4 * 64
    assert report["throughput"]["tokens_per_second"] > 0
    assert report["throughput"]["tokens_per_cpu_second_after_first_step"] > 0
    assert 0 < report["base_weights_gb"] < 0.01
    assert report["peak_memory_gb"]["train"]["rss"] > 0
    assert set(report["durations_seconds"]) >= {"load", "train", "merge"}


def test_metric_lines_parse_with_the_sagemaker_regexes(merged_run):
    report, _, stdout = merged_run
    scraped = {d["Name"]: [float(v) for v in re.findall(d["Regex"], stdout)] for d in METRIC_DEFINITIONS}
    logged = [point["loss"] for point in report["loss_curve"]["train"]]
    assert scraped["train_loss"] == pytest.approx(logged, rel=1e-5)
    assert scraped["eval_loss"] == pytest.approx([report["eval_metrics"]["eval_loss"]], rel=1e-5)
    assert len(scraped["learning_rate"]) == 4 and len(scraped["epoch"]) >= 4
    assert scraped["tokens_per_second"] and all(value > 0 for value in scraped["tokens_per_second"])
    assert scraped["merge_max_abs_logit_diff"] == pytest.approx([report["merge"]["check"]["max_abs_logit_diff"]])
    evaluation = report["evaluation"]
    for side in ("base", "merged"):
        assert scraped[f"eval_loss_{side}"] == pytest.approx([evaluation[side]["eval_loss"]], rel=1e-5)
        assert scraped[f"eval_perplexity_{side}"] == pytest.approx([evaluation[side]["perplexity"]], rel=1e-5)
        assert scraped[f"eval_rouge_l_{side}"] == []  # text rows have no prompt to answer: no score, no line
    assert scraped["eval_loss_improvement"] == pytest.approx([evaluation["eval_loss_improvement"]], rel=1e-4)


def test_merge_check_is_recorded_and_within_tolerance(merged_run):
    check = merged_run[0]["merge"]["check"]
    assert check["dtype"] == "float16" and check["passed"]
    assert check["relative_diff"] <= check["relative_tolerance"] == 1e-2
    assert check["probe_shape"][0] > 0


def test_merged_model_equals_base_plus_adapter_within_tolerance(merged_run, tiny_llama):
    """Independent of the script's own check: fp16 base + saved adapter vs the saved merged model."""
    from peft import PeftModel
    from transformers import AutoModelForCausalLM

    _, out, _ = merged_run
    ids = torch.tensor([[1, 40, 41, 42, 43, 44, 45, 46, 47, 48]])
    with torch.no_grad():
        base = AutoModelForCausalLM.from_pretrained(tiny_llama, dtype=torch.float16)
        base_logits = base(ids).logits.float()
        adapted_logits = PeftModel.from_pretrained(base, out / "adapter")(ids).logits.float()
        merged = AutoModelForCausalLM.from_pretrained(out / "model")
        assert merged.dtype == torch.float16
        merged_logits = merged(ids).logits.float()
    scale = adapted_logits.abs().max()
    assert (adapted_logits - base_logits).abs().max() > 50 * (merged_logits - adapted_logits).abs().max()
    assert (merged_logits - adapted_logits).abs().max() <= 1e-2 * scale


def test_merged_folder_is_servable_safetensors_with_tokenizer_and_generates(merged_run):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    _, out, _ = merged_run
    model_dir = out / "model"
    assert list(model_dir.glob("*.safetensors")) and not list(model_dir.glob("*.bin"))
    assert not (model_dir / "adapter_config.json").exists()
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForCausalLM.from_pretrained(model_dir)
    prompt = tokenizer("[INST] explain llama [/INST]", return_tensors="pt")
    generated = model.generate(**prompt, max_new_tokens=6, min_new_tokens=6, do_sample=False)
    assert generated.shape[1] == prompt["input_ids"].shape[1] + 6
    assert isinstance(tokenizer.decode(generated[0]), str)


def test_the_merged_folder_carries_its_facts_beside_the_evaluation(merged_run, tiny_llama):
    """model_facts.json describes the folder as transformers loads it (the fp16 merge of a 4-bit run)."""
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    report, out, _ = merged_run
    model_dir = out / "model"
    assert (model_dir / "evaluation.json").is_file()
    facts = json.loads((model_dir / "model_facts.json").read_text())
    config = AutoConfig.from_pretrained(model_dir)
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype="auto")
    assert facts == report["model_facts"]
    assert facts == {
        "base_model": str(tiny_llama),
        "model_type": "llama",
        "architecture": "LlamaForCausalLM",
        "parameters": sum(p.numel() for p in model.parameters()),
        "size_bytes": sum(p.stat().st_size for p in model_dir.glob("*.safetensors")),
        "dtype": "float16",
        "context_length": config.max_position_embeddings,
        "num_attention_heads": config.num_attention_heads,
        "num_key_value_heads": config.num_key_value_heads,
        "chat_template": AutoTokenizer.from_pretrained(model_dir).chat_template is not None,
    }
    assert facts["chat_template"]  # the template that rendered the data is saved with the tokenizer


def test_instruction_data_with_chat_template_trains_and_saves_the_adapter_without_merge(tiny_chat_llama, tmp_path):
    data = write_jsonl(tmp_path / "train.jsonl", instruction_rows(24))
    report, _ = run_training(
        tiny_run_args(tiny_chat_llama, data, tmp_path / "out", "--max_steps", "2", "--no-merge", "--no-packing")
    )
    assert report["data"]["train"]["format"] == "instruction"
    assert report["data"]["train"]["examples"] == 24 - 8 and "merge" not in report  # 8: --min_eval_rows
    assert report["data"]["eval"]["rows"] == 8 and report["data"]["eval"]["source"] == "split of the training data"
    evaluation = json.loads((tmp_path / "out" / "model" / "evaluation.json").read_text())
    assert evaluation["tuned_model"] == "adapter on the full-precision base (--no-merge)"
    assert len(evaluation["generations"]) == 5 and evaluation["merged"]["rouge_l"] is not None
    assert (tmp_path / "out" / "model" / "adapter_config.json").is_file()
    assert (tmp_path / "out" / "model" / "tokenizer_config.json").is_file()
    assert not (tmp_path / "out" / "model" / "model_facts.json").exists()  # an adapter is not served as it is


class SimulatedSpotInterruption(Exception):
    pass


class InterruptAtStep(TrainerCallback):
    """Kills the run after `step` optimizer steps, between two checkpoints."""

    def __init__(self, step: int) -> None:
        self.step = step

    def on_step_end(self, args, state, control, **kwargs):
        if state.global_step == self.step:
            raise SimulatedSpotInterruption(f"interrupted at step {self.step}")


def test_rerun_after_interruption_resumes_and_ends_with_the_same_adapter(tiny_llama, tmp_path):
    data = write_jsonl(tmp_path / "train.jsonl", instruction_rows(64))

    def argv(name: str) -> list[str]:
        return tiny_run_args(tiny_llama, data, tmp_path / name, "--max_steps", "6", "--save_steps", "2", "--no-merge")

    uninterrupted, _ = run_training(argv("straight"))
    with pytest.raises(SimulatedSpotInterruption):
        run_training(argv("interrupted"), [InterruptAtStep(5)])
    assert sorted(p.name for p in (tmp_path / "interrupted" / "checkpoints").iterdir()) == [
        "checkpoint-2",
        "checkpoint-4",
    ]
    resumed, stdout = run_training(argv("interrupted"))

    assert resumed["resumed_from"] == str(tmp_path / "interrupted" / "checkpoints" / "checkpoint-4")
    assert "resuming from" in stdout
    # Only steps 5 and 6 ran in the resumed session.
    assert 0 < resumed["throughput"]["train_tokens"] < uninterrupted["throughput"]["train_tokens"] / 2
    assert [p["step"] for p in resumed["loss_curve"]["train"]] == [1, 2, 3, 4, 5, 6]
    losses = [[p["loss"] for p in run["loss_curve"]["train"]] for run in (resumed, uninterrupted)]
    assert losses[0] == losses[1]
    straight = load_file(tmp_path / "straight" / "model" / "adapter_model.safetensors")
    again = load_file(tmp_path / "interrupted" / "model" / "adapter_model.safetensors")
    assert straight.keys() == again.keys()
    for name, tensor in straight.items():
        torch.testing.assert_close(again[name], tensor, rtol=0, atol=1e-6, msg=name)


def test_merge_beyond_tolerance_fails_and_saves_no_merged_model(tiny_llama, tmp_path):
    data = write_jsonl(tmp_path / "train.jsonl", text_rows(16))
    with pytest.raises(MergeCheckError, match="above the tolerance 0"):
        run_training(tiny_run_args(tiny_llama, data, tmp_path / "out", "--max_steps", "2", "--merge_tolerance", "0"))
    assert not list(Path(tmp_path / "out" / "model").glob("*.safetensors"))
    assert (tmp_path / "out" / "training_report.json").is_file()
