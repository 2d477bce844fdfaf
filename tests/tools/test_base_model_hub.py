"""`python -m tools.base_model <hub id>`: huggingface_hub's real client against a hub on 127.0.0.1.

The loopback hub (tests/tools/hub_server.py) answers with the recorded model_info of TinyLlama-1.1B-Chat-v1.0 and
of the gated Llama-3.1-8B-Instruct (tests/data/hub: their published commits, `gated`, file lists), their published
config.json (tests/data/model_configs) and safetensors files whose headers name the tensors transformers saves
for that config (one file, and four shards with an index). The tool runs as a user runs it, in its own process
with HF_ENDPOINT pointing at the loopback hub and HF_TOKEN set or not.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import yaml
from transformers import AutoConfig, AutoModelForCausalLM

from stacks.config.base_model_record import parse_record
from tests.synth import ROOT
from tests.tools.hub_server import TOKEN, Repo, WeightFile, safetensors_header, serve

DATA = ROOT / "tests" / "data"
PUBLISHED = json.loads((DATA / "model_configs" / "published.json").read_text())
TINY, LLAMA = "TinyLlama/TinyLlama-1.1B-Chat-v1.0", "meta-llama/Llama-3.1-8B-Instruct"


def _saved_shapes(record: str) -> dict[str, list[int]]:
    """The tensors save_pretrained writes for the published config (a tied head is not written twice)."""
    config = AutoConfig.from_pretrained(DATA / "model_configs" / record)
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(config)
    tied = {name for name, _ in model.named_parameters(remove_duplicate=False)} - dict(model.named_parameters()).keys()
    return {name: list(tensor.shape) for name, tensor in model.state_dict().items() if name not in tied}


def _repo(hub_id: str, record: str, shards: int) -> Repo:
    folder = DATA / "hub" / hub_id
    files: dict[str, bytes | WeightFile] = {
        "config.json": (DATA / "model_configs" / record / "config.json").read_bytes(),
        "tokenizer_config.json": (folder / "tokenizer_config.json").read_bytes(),
    }
    shapes = _saved_shapes(record)
    names = sorted(shapes, key=lambda n: (n.count("layers.") and int(n.split("layers.")[1].split(".")[0]), n))
    if shards == 1:
        files["model.safetensors"] = WeightFile(*safetensors_header(shapes))
        return Repo(json.loads((folder / "model_info.json").read_text()), files)
    weight_map = {}
    for index in range(shards):
        part = names[index * len(names) // shards : (index + 1) * len(names) // shards]
        shard = f"model-{index + 1:05d}-of-{shards:05d}.safetensors"
        files[shard] = WeightFile(*safetensors_header({name: shapes[name] for name in part}))
        weight_map.update(dict.fromkeys(part, shard))
    files["model.safetensors.index.json"] = json.dumps({"metadata": {}, "weight_map": weight_map}).encode()
    return Repo(json.loads((folder / "model_info.json").read_text()), files)


@pytest.fixture(scope="module")
def hub():
    repos = {TINY: _repo(TINY, "tinyllama-1.1b-chat-v1.0", 1), LLAMA: _repo(LLAMA, "llama-3.1-8b-instruct", 4)}
    with serve(repos) as running:
        yield running


def _run(hub, tmp_path: Path, *args: str, token: str | None = None) -> subprocess.CompletedProcess:
    # huggingface_hub takes TRANSFORMERS_OFFLINE (which other tests set in this process) as HF_HUB_OFFLINE
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "HUGGING_FACE", "TRANSFORMERS_"))}
    env |= {"HF_ENDPOINT": hub.url, "HF_HOME": str(tmp_path / "hf"), "HF_HUB_DISABLE_TELEMETRY": "1"}
    if token:
        env["HF_TOKEN"] = token
    command = [sys.executable, "-m", "tools.base_model", *args, "--output", str(tmp_path / "models")]
    return subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)


def _record(tmp_path: Path, name: str):
    path = tmp_path / "models" / f"{name}.yaml"
    return parse_record(yaml.safe_load(path.read_text()), source=str(path))


def test_a_hub_id_is_recorded_at_its_commit_from_the_headers_alone(hub, tmp_path):
    hub.requests.clear()
    done = _run(hub, tmp_path, TINY)
    print(done.stdout, done.stderr)
    assert done.returncode == 0, done.stderr
    record = _record(tmp_path, "tinyllama-1.1b-chat-v1.0")
    info = hub.repos[TINY].info
    assert (record.hub_id, record.source, record.revision, record.gated) == (TINY, TINY, info["sha"], False)
    assert record.parameters == PUBLISHED["tinyllama-1.1b-chat-v1.0"]["parameters"] == info["safetensors"]["total"]
    assert (record.chat_template, record.dtype, record.context_length) == (True, "bfloat16", 2048)
    weights = [(method, ranged) for method, path, ranged in hub.requests if path.endswith(".safetensors")]
    assert weights and all(method == "HEAD" or ranged for method, ranged in weights), weights
    loaded = "serving: model_type llama is loaded by serving.backend lmi_neuronx, vllm_neuronx"
    assert done.stdout.splitlines()[-1] == loaded


def test_a_gated_model_without_access_is_refused_in_one_line(hub, tmp_path):
    done = _run(hub, tmp_path, LLAMA)
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.splitlines() == [
        f"base_model: refused: {LLAMA}: gated, and this token has no access to its files: request access on "
        f"https://huggingface.co/{LLAMA}, then log in with `hf auth login` (huggingface_hub's CLI) or set HF_TOKEN "
        "to a token that has access; nothing written"
    ]
    assert not (tmp_path / "models").exists()


def test_a_gated_model_is_read_with_the_user_s_token_shard_by_shard(hub, tmp_path):
    hub.requests.clear()
    done = _run(hub, tmp_path, LLAMA, token=TOKEN)
    assert done.returncode == 0, done.stderr
    record = _record(tmp_path, "llama-3.1-8b-instruct")
    assert (record.gated, record.revision) == (True, hub.repos[LLAMA].sha)
    assert record.parameters == PUBLISHED["llama-3.1-8b-instruct"]["parameters"]
    assert (record.num_key_value_heads, record.head_dim, record.tie_word_embeddings) == (8, 128, False)
    ranged = {path.rsplit("/", 1)[-1] for method, path, byte_range in hub.requests if byte_range}
    assert ranged == {f"model-0000{i}-of-00004.safetensors" for i in range(1, 5)}


@pytest.mark.parametrize(
    ("model", "extra", "line"),
    [
        (
            "no-such-org/no-such-model",
            (),
            "no-such-org/no-such-model: no such model on the hub, or a private one this token cannot see: check the "
            "id, or log in with `hf auth login` (huggingface_hub's CLI) or set HF_TOKEN to a token that has access; "
            "nothing written",
        ),
        (
            TINY,
            ("--revision", "v9"),
            f"{TINY}: no revision 'v9'; give a branch, tag or commit of https://huggingface.co/{TINY}",
        ),
    ],
)
def test_an_unknown_repository_or_revision_is_refused_in_one_line(hub, tmp_path, model, extra, line):
    done = _run(hub, tmp_path, model, *extra)
    assert (done.returncode, done.stderr.splitlines()) == (2, [f"base_model: refused: {line}"])
