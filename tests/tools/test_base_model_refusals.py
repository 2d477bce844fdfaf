"""Every refusal of `python -m tools.base_model` is one stderr line, exit 2, and leaves nothing written.

The broken inputs are the published Qwen3-8B config.json (tests/data/model_configs) with one thing wrong, and the
copies of a model a user could point the tool at: a folder, an S3 prefix (moto)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from moto import mock_aws

from tests.synth import ROOT
from tools.base_model import main

QWEN3 = json.loads((ROOT / "tests" / "data" / "model_configs" / "qwen3-8b" / "config.json").read_text())
MPNET = {  # a transformers model type with every field a record needs, and no causal language model
    "model_type": "mpnet", "architectures": ["MPNetForMaskedLM"], "hidden_size": 768, "intermediate_size": 3072,
    "vocab_size": 30527, "max_position_embeddings": 514, "num_hidden_layers": 12, "num_attention_heads": 12,
    "torch_dtype": "float32",
}  # fmt: skip


def _refusal(capsys, tmp_path: Path, *argv: str) -> str:
    code = main([*argv, "--output", str(tmp_path / "models"), "--region", "us-east-1"])
    captured = capsys.readouterr()
    lines = captured.err.splitlines()
    assert (code, captured.out, len(lines)) == (2, "", 1), captured.err
    assert lines[0].startswith("base_model: refused: ")
    assert not (tmp_path / "models").exists()
    return lines[0].removeprefix("base_model: refused: ")


def _folder(tmp_path: Path, files: dict[str, bytes | str]) -> tuple[Path, str]:
    folder = tmp_path / "model"
    folder.mkdir()
    for name, content in files.items():
        (folder / name).write_bytes(content.encode() if isinstance(content, str) else content)
    return folder, folder.resolve().as_posix()


def _qwen3(**changes) -> str:
    return json.dumps({key: value for key, value in {**QWEN3, **changes}.items() if value is not None})


@pytest.mark.parametrize(
    ("files", "line"),
    [
        ({}, "{f}: no config.json; give a folder holding a saved model (config.json, *.safetensors)"),
        (
            {"config.json": "{"},
            "{f}/config.json: cannot be read as a JSON object (Expecting property name enclosed in double quotes: "
            "line 1 column 2 (char 1)); nothing written",
        ),
        ({"config.json": "[]"}, "{f}/config.json: cannot be read as a JSON object (it is a list); nothing written"),
        (
            {"config.json": _qwen3(num_hidden_layers="36")},
            "{f}/config.json: num_hidden_layers: got '36'; expected a positive integer, nothing written",
        ),
        (
            {"config.json": _qwen3(architectures=None)},
            "{f}/config.json: architectures: missing; a base-model record needs its first entry, nothing written",
        ),
        (
            {"config.json": _qwen3(model_type="in_house_lm")},
            "{f}/config.json: model_type: 'in_house_lm' is not a transformers model type; the record reads its "
            "defaults from transformers' config class, nothing written",
        ),
        (
            {"config.json": json.dumps(MPNET)},
            "{f}/config.json: model_type: transformers has no causal language model for 'mpnet'; a base model "
            "generates text, nothing written",
        ),
        (
            {"config.json": _qwen3(torch_dtype=None)},
            "{f}/config.json: torch_dtype: missing and no safetensors to read it from; a base-model record needs "
            "the weights' dtype, nothing written",
        ),
        (
            {"config.json": _qwen3(), "model.safetensors": b"\x10\x00"},
            "{f}: its safetensors headers cannot be read (model.safetensors: shorter than the 8-byte safetensors "
            "header length); nothing written",
        ),
    ],
)
def test_a_folder_the_record_cannot_be_read_from_is_refused(tmp_path, capsys, files, line):
    folder, shown = _folder(tmp_path, files)
    assert _refusal(capsys, tmp_path, str(folder)) == line.format(f=shown)


def test_a_hub_id_the_schema_refuses_is_refused_with_the_schema_s_line(tmp_path, capsys):
    folder, shown = _folder(tmp_path, {"config.json": _qwen3()})
    assert _refusal(capsys, tmp_path, str(folder), "--hub-id", "Qwen/Qwen3 8B") == (
        f"the record of {shown}: hub_id: got 'Qwen/Qwen3 8B'; must match [\\w.-]+(/[\\w.-]+)? (the id "
        "training.hyperparameters.model_id names); nothing written"
    )


def test_copy_options_on_a_hub_id_are_refused(tmp_path, capsys):
    assert _refusal(capsys, tmp_path, "Qwen/Qwen3-8B", "--gated") == (
        "Qwen/Qwen3-8B: --gated and --hub-id describe a copy; the hub says what Qwen/Qwen3-8B is"
    )


def test_an_upload_to_an_unknown_environment_is_refused(tmp_path, capsys):
    folder, _ = _folder(tmp_path, {"config.json": _qwen3()})
    assert _refusal(capsys, tmp_path, str(folder), "--upload", "qa", "--config-dir", str(ROOT / "config")) == (
        f"{(ROOT / 'config').as_posix()}/qa.yaml: env: no such file for env 'qa'; known environments: dev, local, "
        "prod, staging"
    )


@pytest.mark.parametrize(
    ("objects", "uri", "line"),
    [
        ({}, "s3://", "s3://: no bucket; give s3://<bucket>/<prefix>/"),
        (
            {"m/config.json": b"\xff"},
            "s3://models/m/",
            "s3://models/m/config.json: cannot be read as a JSON object ('utf-8' codec can't decode byte 0xff in "
            "position 0: invalid start byte); nothing written",
        ),
        (
            {"m/config.json": _qwen3().encode(), "m/model.safetensors": b"\x08\0\0\0\0\0\0\0{bad json"},
            "s3://models/m/",
            "s3://models/m/: its safetensors headers cannot be read (Expecting property name enclosed in double "
            "quotes: line 1 column 2 (char 1)); nothing written",
        ),
    ],
)
def test_an_s3_copy_the_record_cannot_be_read_from_is_refused(tmp_path, capsys, objects, uri, line):
    with mock_aws():
        import boto3

        s3 = boto3.client("s3", region_name="us-east-1")
        s3.create_bucket(Bucket="models")
        for key, body in objects.items():
            s3.put_object(Bucket="models", Key=key, Body=body)
        assert _refusal(capsys, tmp_path, uri) == line
