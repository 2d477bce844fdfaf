"""`python -m tools.base_model <folder>`: records from published config.json files and from saved models.

tests/data/model_configs holds the published config.json of current models (README.md there says where each came
from) and published.json their published parameter counts (the hub's safetensors totals). For every folder there,
the record's parameters equal what transformers builds from that config.json on the meta device and the
published figure, and its other facts equal what transformers reads from the file. The folders are iterated, never
listed here. A saved tiny model (real safetensors) is counted from its headers; every refusal is one line.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import torch
import yaml
from transformers import AutoConfig, AutoModelForCausalLM, LlamaConfig, LlamaForCausalLM

from stacks.config.base_model_record import parse_record
from tests.synth import ROOT
from tools.base_model import main
from tools.base_model.catalog import HEADER, render

CONFIGS = ROOT / "tests" / "data" / "model_configs"
PUBLISHED = json.loads((CONFIGS / "published.json").read_text())
FOLDERS = sorted(path.name for path in CONFIGS.iterdir() if (path / "config.json").is_file())


def _built(folder: Path):
    """(config, model) as transformers builds them from the folder, on the meta device."""
    config = AutoConfig.from_pretrained(folder)
    with torch.device("meta"):
        return config, AutoModelForCausalLM.from_config(config)


def _record(output: Path, name: str):
    path = output / f"{name}.yaml"
    return parse_record(yaml.safe_load(path.read_text()), source=str(path))


def _tool(capsys, *argv: str) -> tuple[int, list[str], list[str]]:
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out.splitlines(), captured.err.splitlines()


def test_every_published_model_has_a_published_parameter_count():
    assert FOLDERS and set(FOLDERS) == set(PUBLISHED)


@pytest.mark.parametrize("name", FOLDERS)
def test_a_published_config_s_record_matches_transformers_and_the_published_count(name, tmp_path, capsys):
    published = PUBLISHED[name]
    code, out, err = _tool(capsys, str(CONFIGS / name), "--hub-id", published["hub_id"], "--output", str(tmp_path))
    assert (code, err) == (0, []), err
    record = _record(tmp_path, name)
    config, model = _built(CONFIGS / name)
    built = sum(parameter.numel() for parameter in model.parameters())
    tied = model.get_output_embeddings().weight is model.get_input_embeddings().weight
    print(
        f"{name}: {config.model_type} tool {record.parameters:,} transformers {built:,} "
        f"published {published['parameters']:,} tied {tied}"
    )
    assert record.parameters == built == published["parameters"]
    assert record.tie_word_embeddings == tied == config.tie_word_embeddings
    raw = json.loads((CONFIGS / name / "config.json").read_text())
    assert (record.model_type, record.architecture) == (config.model_type, config.architectures[0])
    assert record.dtype == raw.get("torch_dtype", raw.get("dtype"))
    assert record.context_length == config.max_position_embeddings
    for field in (
        "hidden_size",
        "num_hidden_layers",
        "num_attention_heads",
        "num_key_value_heads",
        "intermediate_size",
        "vocab_size",
    ):
        assert getattr(record, field) == getattr(config, field), field
    assert record.head_dim == model.model.layers[0].self_attn.head_dim
    assert (record.hub_id, record.revision, record.chat_template) == (published["hub_id"], None, None)


def saved_llama(folder: Path, *, tied: bool, dtype=torch.bfloat16) -> LlamaForCausalLM:
    """A tiny random-init Llama saved as a user's folder holds one (config.json, model.safetensors)."""
    config = LlamaConfig(
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        vocab_size=256,
        max_position_embeddings=512,
        tie_word_embeddings=tied,
    )
    torch.manual_seed(0)
    model = LlamaForCausalLM(config).to(dtype)
    model.save_pretrained(folder)
    return model


@pytest.mark.parametrize("tied", [True, False])
def test_a_saved_model_is_counted_from_its_safetensors_headers(tmp_path, capsys, tied):
    model = saved_llama(tmp_path / "tiny", tied=tied)
    (tmp_path / "tiny" / "chat_template.jinja").write_text("{{ messages }}")
    code, out, err = _tool(capsys, str(tmp_path / "tiny"), "--hub-id", "org/tiny", "--output", str(tmp_path / "m"))
    assert code == 0, err
    record = _record(tmp_path / "m", "tiny")
    assert record.parameters == model.num_parameters() == sum(p.numel() for p in model.parameters())
    assert (record.tie_word_embeddings, record.dtype, record.chat_template) == (tied, "bfloat16", True)
    assert (record.num_key_value_heads, record.head_dim, record.context_length) == (2, 16, 512)


def test_a_record_reads_back_as_written(tmp_path, capsys):
    _tool(capsys, str(CONFIGS / "smollm3-3b"), "--hub-id", "HuggingFaceTB/SmolLM3-3B", "--output", str(tmp_path))
    text = (tmp_path / "smollm3-3b.yaml").read_text()
    record = _record(tmp_path, "smollm3-3b")
    assert text.startswith(HEADER) and render(record) == text
    assert list(yaml.safe_load(text)) == list(record.__dataclass_fields__)


def test_a_left_out_tie_word_embeddings_takes_the_model_class_default(tmp_path, capsys):
    """LlamaConfig's default is untied: the head is counted (a default of true would drop 262,668,288)."""
    folder = tmp_path / "llama-3.2-1b-instruct"
    shutil.copytree(CONFIGS / "llama-3.2-1b-instruct", folder)
    raw = json.loads((folder / "config.json").read_text())
    del raw["tie_word_embeddings"]
    (folder / "config.json").write_text(json.dumps(raw))
    assert _tool(capsys, str(folder), "--output", str(tmp_path / "m"))[0] == 0
    record = _record(tmp_path / "m", "llama-3.2-1b-instruct")
    assert record.tie_word_embeddings is False and LlamaConfig().tie_word_embeddings is False
    assert record.parameters == PUBLISHED["llama-3.2-1b-instruct"]["parameters"] + 128256 * 2048


@pytest.mark.parametrize(
    ("field", "line"),
    [
        ("num_attention_heads", "num_attention_heads: missing (its attention heads); a base-model record needs it"),
        (
            "max_position_embeddings",
            "max_position_embeddings: missing (the context it is built for); a base-model record needs it",
        ),
        ("model_type", "model_type: missing; a base-model record needs it"),
    ],
)
def test_a_config_missing_a_field_the_record_needs_is_refused_in_one_line(tmp_path, capsys, field, line):
    folder = tmp_path / "broken"
    folder.mkdir()
    raw = json.loads((CONFIGS / "qwen3-8b" / "config.json").read_text())
    del raw[field]
    (folder / "config.json").write_text(json.dumps(raw))
    code, out, err = _tool(capsys, str(folder), "--output", str(tmp_path / "m"))
    assert (code, out) == (2, [])
    assert err == [f"base_model: refused: {folder.resolve().as_posix()}/config.json: {line}, nothing written"]
    assert not (tmp_path / "m").exists()


def test_an_architecture_no_backend_loads_is_written_and_said(tmp_path, capsys):
    """The synth and the profile refuse it; the record is data about the model either way."""
    folder = tmp_path / "gpt2-like"
    folder.mkdir()
    raw = json.loads((CONFIGS / "qwen3-8b" / "config.json").read_text())
    raw |= {"model_type": "olmo2", "architectures": ["Olmo2ForCausalLM"]}
    (folder / "config.json").write_text(json.dumps(raw))
    code, out, err = _tool(capsys, str(folder), "--output", str(tmp_path / "m"))
    assert (code, err) == (0, [])
    assert out[-1].startswith("serving: no serving.backend loads model_type olmo2 (lmi_neuronx: ")
    assert out[-1].endswith("; the synth will refuse it")


def test_a_record_with_other_facts_is_replaced_only_when_forced(tmp_path, capsys):
    models, folder = tmp_path / "m", CONFIGS / "llama-2-7b-chat-hf"
    nous = ("--hub-id", "NousResearch/Llama-2-7b-chat-hf", "--output", str(models))
    meta = ("--hub-id", "meta-llama/Llama-2-7b-chat-hf", "--gated", "--output", str(models))
    assert _tool(capsys, str(folder), *meta)[0] == 0
    written = (models / "llama-2-7b-chat-hf.yaml").read_text()
    code, out, err = _tool(capsys, str(folder), *meta)
    assert code == 0 and out[0].endswith(
        "unchanged (meta-llama/Llama-2-7b-chat-hf: llama LlamaForCausalLM, "
        "6,738,415,616 parameters, float16, context 4096, gated)"
    )
    code, out, err = _tool(capsys, str(folder), *nous)
    assert (code, out) == (2, []) and err == [
        f"base_model: refused: {models.as_posix()}/llama-2-7b-chat-hf.yaml: already records other facts "
        "(hub_id: 'meta-llama/Llama-2-7b-chat-hf' -> 'NousResearch/Llama-2-7b-chat-hf'; gated: True -> False): "
        "review them, then run again with --force (FORCE=1) to replace it"
    ]
    assert (models / "llama-2-7b-chat-hf.yaml").read_text() == written
    code, out, err = _tool(capsys, str(folder), *nous, "--force")
    assert code == 0 and ": replaced (NousResearch/" in out[0]
    assert _record(models, "llama-2-7b-chat-hf").hub_id == "NousResearch/Llama-2-7b-chat-hf"


def test_a_path_that_is_neither_a_folder_nor_a_hub_id_is_refused(tmp_path, capsys):
    code, out, err = _tool(capsys, "./no/such/folder", "--output", str(tmp_path))
    assert (code, err) == (
        2,
        ["base_model: refused: ./no/such/folder: no such folder, and not a hub id (org/name) or s3:// URI"],
    )
