"""tools/config_edit.py on the shipped config/*.yaml: a change is its own lines, every other byte stays.

What the files mean is read back with PyYAML (the loader the synth uses); what changed is the unified diff."""

from __future__ import annotations

import difflib
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.synth import ROOT
from tools.config_edit import EditError, edit

SHIPPED = sorted(path.name for path in (ROOT / "config").glob("*.yaml"))


def _copy(tmp_path: Path, name: str) -> Path:
    path = tmp_path / name
    path.write_text((ROOT / "config" / name).read_text())
    return path


def _changed(before: str, after: str) -> list[str]:
    diff = difflib.unified_diff(before.splitlines(), after.splitlines(), lineterm="", n=0)
    return [line for line in diff if line[:1] in "+-" and line[:3] not in ("+++", "---")]


@pytest.mark.parametrize("name", SHIPPED)
def test_setting_every_scalar_to_its_own_value_leaves_the_file_as_it_was(tmp_path, name):
    path = _copy(tmp_path, name)
    before = path.read_text()

    def scalars(node, prefix=""):
        for key, value in node.items():
            if isinstance(value, dict) and value:
                yield from scalars(value, f"{prefix}{key}.")
            elif not isinstance(value, dict | list):
                yield f"{prefix}{key}", value

    values = dict(scalars(yaml.safe_load(before)))
    assert values and edit(path, values) is False
    assert path.read_text() == before


def test_a_value_is_replaced_on_its_line_with_its_comment(tmp_path):
    path = _copy(tmp_path, "prod.yaml")
    before = path.read_text()
    assert edit(path, {"training.spot": True, "training.base_model_key": "base-models/llama-3.1-8b-instruct/"})
    assert _changed(before, path.read_text()) == [
        "-  spot: false             # on-demand: a production run is not interrupted",
        "+  spot: true             # on-demand: a production run is not interrupted",
        "-  base_model_key: base-models/llama-2-7b-chat-hf/",
        "+  base_model_key: base-models/llama-3.1-8b-instruct/",
    ]


def test_a_new_key_and_a_new_mapping_go_at_the_end_of_their_parent(tmp_path):
    path = _copy(tmp_path, "staging.yaml")
    before = path.read_text()
    assert edit(path, {"training.base_model_key": "base-models/qwen3-8b/", "serving.extra.first": 1})
    after = yaml.safe_load(path.read_text())
    assert after["training"]["base_model_key"] == "base-models/qwen3-8b/" and after["serving"]["extra"] == {"first": 1}
    assert list(after["training"])[-1] == "base_model_key" and list(after["serving"])[-1] == "extra"
    assert sorted(_changed(before, path.read_text())) == sorted(
        ["+  base_model_key: base-models/qwen3-8b/", "+  extra:", "+    first: 1"]
    )


def test_a_removed_key_takes_only_its_own_line(tmp_path):
    path = _copy(tmp_path, "staging.yaml")
    before = path.read_text()
    assert edit(path, removed=["training.hyperparameters.model_id"])
    assert _changed(before, path.read_text()) == ["-    model_id: Qwen/Qwen2.5-7B-Instruct"]


def test_a_flow_style_parent_is_refused_and_nothing_written(tmp_path):
    path = tmp_path / "x.yaml"
    path.write_text("training:\n  neuron_compile: {enabled: false}  # inline\n")
    with pytest.raises(EditError):
        edit(path, {"training.neuron_compile.instance_type": "ml.trn1.2xlarge"})
    assert path.read_text() == "training:\n  neuron_compile: {enabled: false}  # inline\n"


def test_the_command_sets_and_removes(tmp_path):
    path = _copy(tmp_path, "staging.yaml")
    command = [
        sys.executable,
        "tools/config_edit.py",
        str(path),
        "training.base_model_key=base-models/x/",
        "--remove",
        "training.hyperparameters.model_id",
    ]
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert (done.returncode, done.stdout) == (0, f"{path}: changed\n"), done.stderr
    training = yaml.safe_load(path.read_text())["training"]
    assert training["base_model_key"] == "base-models/x/" and "model_id" not in training["hyperparameters"]
