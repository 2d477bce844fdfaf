"""`make demo` end to end: pretrained tiny base, QLoRA train + merge, local server, the seed's prompt to both."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[3]


@pytest.mark.slow
def test_demo_answers_the_sample_prompt_with_the_base_and_the_fine_tuned_model(tmp_path):
    work, cache = tmp_path / "demo", tmp_path / "pretrained"
    # One pretraining and one QLoRA step: the checks need both models served and answering, not learning
    # (the QLoRA and pretraining tests measure that), and a few new tokens show the answers are generated.
    argv = [
        sys.executable,
        "local/demo.py",
        "--workdir",
        str(work),
        "--cache",
        str(cache),
        "--pretrain-steps",
        "1",
        "--max-steps",
        "1",
        "--max-new-tokens",
        "8",
    ]
    result = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=900)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    demo = json.loads((work / "demo_result.json").read_text())
    assert set(demo["answers"]) == {"base", "fine-tuned"}
    assert demo["prompts"][0].endswith("What is a machine learning? [/INST]")
    assert demo["prompts"][1] == "<s>[INST] What is machine learning? [/INST]"
    for label, answers in demo["answers"].items():
        assert len(answers) == 2
        assert all(answer["details"]["generated_tokens"] >= 1 and 0 <= answer["overlap"] <= 1 for answer in answers)
        port = int((work / f"server-{label}.port").read_text())  # written by the server once /ping answered
        assert f"listening on http://127.0.0.1:{port}" in (work / f"server-{label}.log").read_text()
    assert demo["reference"]["instruction"] == "What is machine learning?"
    assert "-- base answer" in result.stdout and "-- fine-tuned answer" in result.stdout
    assert "== timings" in result.stdout
    assert Path(demo["base_model"]).parent == cache
    properties = (work / "serving.properties").read_text()
    assert "option.n_positions=512" in properties and "{{" not in properties


def test_the_sample_prompts_closest_dataset_question_is_what_is_machine_learning():
    from local import demo

    rows = demo.read_rows(ROOT / "data" / "instructions.jsonl")
    assert demo.question_of(demo.SAMPLE_PROMPT) == "What is a machine learning?"
    assert demo.closest_row(demo.question_of(demo.SAMPLE_PROMPT), rows)["instruction"] == "What is machine learning?"


def test_answer_overlap_is_word_f1():
    from local import demo

    assert demo.answer_overlap("Machine learning is data.", "machine learning is a field") == pytest.approx(
        2 * (3 / 4) * (3 / 5) / (3 / 4 + 3 / 5)
    )
    assert demo.answer_overlap("", "anything") == 0.0
    assert demo.answer_overlap("the same words", "words the same") == 1.0


def test_shipped_dataset_is_a_few_hundred_instruction_rows():
    rows = [json.loads(line) for line in (ROOT / "data" / "instructions.jsonl").read_text().splitlines()]
    assert 200 <= len(rows) <= 1000
    assert all(set(row) == {"instruction", "response"} and row["instruction"] and row["response"] for row in rows)
