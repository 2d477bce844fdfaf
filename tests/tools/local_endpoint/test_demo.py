"""`make demo` end to end: tiny model, QLoRA train + merge, local server, the seed's sample prompt."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]


@pytest.mark.slow
def test_demo_answers_the_sample_prompt(tmp_path):
    work = tmp_path / "demo"
    result = subprocess.run(
        [sys.executable, "tools/demo.py", "--workdir", str(work), "--max-steps", "2", "--max-new-tokens", "40"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    demo = json.loads((work / "demo_result.json").read_text())
    assert demo["answer"]["generated_text"].strip(), "the answer must be non-empty text"
    assert demo["answer"]["details"]["generated_tokens"] >= 1
    assert "== answer" in result.stdout and "== timings" in result.stdout
    properties = (work / "serving.properties").read_text()
    assert "option.n_positions=512" in properties and "{{" not in properties
    port = int((work / "server.port").read_text())  # written by the server once /ping answered
    assert f"listening on http://127.0.0.1:{port}" in (work / "server.log").read_text()


def test_shipped_dataset_is_a_few_hundred_instruction_rows():
    rows = [json.loads(line) for line in (ROOT / "data" / "instructions.jsonl").read_text().splitlines()]
    assert 200 <= len(rows) <= 1000
    assert all(set(row) == {"instruction", "response"} and row["instruction"] and row["response"] for row in rows)
