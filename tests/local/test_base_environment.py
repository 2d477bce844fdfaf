"""`make pipeline BASE=<folder>` makes the local environment for the folder's model before anything deploys: its
record, the backend that loads its architecture, that backend's profile and, for vLLM Neuron, the compile step
whose exporter the job runner stands in for. Every file it writes is checked by the synth's own loader."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import yaml

from local import base_environment
from local.emulator import optimum_export
from stacks.config import load_config
from stacks.serving.backends import backend
from tests.synth import ROOT

QLORA = ROOT / "training_code" / "qlora"


@pytest.fixture(scope="module")
def tiny_qwen3(tmp_path_factory) -> Path:
    """A random-init Qwen3 of the shape training_code's families keep (q/k norms, GQA, a tied head)."""
    sys.path.insert(0, str(QLORA))
    from finetune.families import build_tiny_family

    texts = [json.loads(line)["instruction"] for line in (ROOT / "data" / "instructions.jsonl").open()][:200]
    return build_tiny_family(tmp_path_factory.mktemp("bases") / "tiny-qwen3", "qwen3", texts)


def test_a_qwen3_base_makes_the_local_environment_vllm_with_its_compile_step(tiny_qwen3, tmp_path):
    said: list[str] = []
    before = (ROOT / "config" / "local.yaml").read_bytes()
    made = base_environment.prepare(tiny_qwen3, None, "local", tmp_path, said.append)
    assert made is not None and made.backend == "vllm_neuronx"
    config = load_config("local", made.config_dir)
    assert config.serving.backend == "vllm_neuronx" and config.compiles_for_neuron
    assert config.training.base_model_key == "base-models/tiny-qwen3/"
    assert config.base_model.record.model_type == "qwen3" and config.base_model.record.tie_word_embeddings
    assert config.serving.neuron.sequence_length <= config.base_model.record.context_length
    shipped = yaml.safe_load((ROOT / "config" / "local.yaml").read_text())
    written = yaml.safe_load((made.config_dir / "local.yaml").read_text())
    assert written["pruning"] == shipped["pruning"] and written["data"] == shipped["data"]
    assert (ROOT / "config" / "local.yaml").read_bytes() == before  # the repository's files stay as they are
    assert said and "serves it with vllm_neuronx" in said[0]


def test_a_backend_that_cannot_load_the_base_is_refused_in_one_line(tiny_qwen3, tmp_path):
    with pytest.raises(SystemExit) as refused:
        base_environment.prepare(tiny_qwen3, "lmi_neuronx", "local", tmp_path, print)
    loads = ", ".join(backend("lmi_neuronx").architectures)  # the backend's record: what its container loads
    assert str(refused.value.code) == (
        f"pipeline: BACKEND=lmi_neuronx loads {loads}, not the base's model_type qwen3: use BACKEND=vllm_neuronx"
    )
    assert "qwen3" not in loads


def test_the_shipped_base_and_backend_keep_the_shipped_environment(tmp_path):
    assert base_environment.prepare(None, None, "local", tmp_path, print) is None
    assert base_environment.prepare(None, "lmi_neuronx", "local", tmp_path, print) is None


def _export(model: Path, out: Path, tp: int) -> int:
    argv = ["export", "neuron", "--model", str(model), "--task", "text-generation", "--batch_size", "4"]
    argv += ["--sequence_length", "256", "--tensor_parallel_size", str(tp), "--instance_type", "inf2", str(out)]
    return optimum_export.main(argv)


def test_the_export_stand_in_writes_the_exported_layout_with_its_shape(tiny_qwen3, tmp_path):
    assert _export(tiny_qwen3, tmp_path / "out", 2) == 0
    shape = json.loads((tmp_path / "out" / "neuron_config.json").read_text())
    assert (shape["batch_size"], shape["sequence_length"], shape["tp_degree"], shape["target"]) == (4, 256, 2, "inf2")
    assert (tmp_path / "out" / "checkpoint" / "weights" / "model.safetensors").is_file()
    assert (tmp_path / "out" / "config.json").read_text() == (tiny_qwen3 / "config.json").read_text()


def test_the_export_stand_in_refuses_what_the_exporter_refuses(tiny_qwen3, tmp_path):
    with pytest.raises(SystemExit) as refused:
        _export(tiny_qwen3, tmp_path / "out", 3)
    assert str(refused.value.code) == (
        "optimum-cli export neuron: num_attention_heads 4 is not divisible by tensor_parallel_size 3"
    )
    assert not (tmp_path / "out").exists()
