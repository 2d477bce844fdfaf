"""A run on weights that are not the model its record describes is refused in one line before anything is loaded.

The record is the shipped config/models/tiny-pretrained.yaml as the Training stack passes it (the job's Environment,
stacks.code_contract.qlora.base_record_environment); the bases are tiny Llamas built here, one as the record
describes it and one of another size. What a base is comes from transformers (its config, the model it builds),
what the record says from the YAML file.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from finetune.base_record import CHECKED_FACTS, RECORD_VARIABLE, BaseRecordError, check_base_record
from qlora_test_helpers import QLORA_DIR, instruction_rows, load_train_entry, tiny_run_args, vocab_texts, write_jsonl

from local.emulator import hub_cache
from stacks.code_contract.qlora import base_record_environment
from tests.local.emulator.tiny_training import recorded_base

ROOT = Path(__file__).resolve().parents[3]
RECORD = yaml.safe_load((ROOT / "config" / "models" / "tiny-pretrained.yaml").read_text())
# As the local environment's job gets it: its base is a copy in the bucket (the `model` channel), and for a base
# named by its hub id, as a hub job gets it.
ENVIRONMENT = dict([base_record_environment("config/models/tiny-pretrained.yaml", RECORD, None)])
HUB_ENVIRONMENT = dict([base_record_environment("config/models/tiny-pretrained.yaml", RECORD, RECORD["hub_id"])])


@pytest.fixture(scope="module")
def recorded(tmp_path_factory) -> Path:
    """A tiny Llama of the record's shape (its embedding rows the record's vocabulary)."""
    return recorded_base(tmp_path_factory.mktemp("recorded"), vocab_texts(), vocab_size=384)


def _differing(base: Path) -> dict[str, tuple]:
    """{fact: (found, recorded)} for the config facts transformers reads differently from the record."""
    from transformers import AutoConfig

    config = AutoConfig.from_pretrained(base)
    found = {
        name: getattr(config, name)
        for name in ("hidden_size", "num_hidden_layers", "num_attention_heads", "intermediate_size", "vocab_size")
    }
    found["context_length"] = config.max_position_embeddings
    return {name: (value, RECORD[name]) for name, value in found.items() if value != RECORD[name]}


def test_a_base_whose_config_differs_from_its_record_is_refused_before_loading(tiny_llama, tmp_path, monkeypatch):
    data = write_jsonl(tmp_path / "train.jsonl", instruction_rows(24))
    monkeypatch.setenv(RECORD_VARIABLE, HUB_ENVIRONMENT[RECORD_VARIABLE])
    with pytest.raises(SystemExit) as caught:
        load_train_entry().main(tiny_run_args(tiny_llama, data, tmp_path / "out", "--max_steps", "1"))
    line = str(caught.value.code)
    differing = _differing(tiny_llama)
    assert {"hidden_size", "num_hidden_layers", "vocab_size"} <= set(differing)  # the case is what it claims
    assert "\n" not in line
    assert line.startswith(
        f"train.py: error: base model {tiny_llama} is not the model config/models/tiny-pretrained.yaml describes: "
    )
    for name, (found, expected) in differing.items():
        assert f"{name} is {found!r}, the record says {expected!r}" in line, line
    assert line.endswith(
        f"; rewrite the record from these weights (`make base-model MODEL={tiny_llama} FORCE=1`) or train on the "
        "model it describes (tiny-pretrained)"
    )
    assert "parameters" not in line  # refused on its config: the weights were never read
    assert not (tmp_path / "out").exists()  # nothing loaded, trained or written


def test_a_channel_base_is_named_by_its_copy_in_the_bucket(tiny_llama):
    with pytest.raises(BaseRecordError) as caught:
        check_base_record(str(tiny_llama), channel=True, environ=ENVIRONMENT)
    assert str(caught.value).endswith(
        "; rewrite the record from these weights (`make base-model MODEL=s3://<artifact bucket>/base-models/"
        "tiny-pretrained/ FORCE=1`) or train on the model it describes"
    )


def test_a_base_as_its_record_describes_passes_with_its_parameters_from_the_headers(recorded):
    from transformers import AutoModelForCausalLM

    record, found = check_base_record(str(recorded), channel=True, environ=ENVIRONMENT)
    model = AutoModelForCausalLM.from_pretrained(recorded)
    assert record == "config/models/tiny-pretrained.yaml"
    assert found["parameters"] == sum(p.numel() for p in model.parameters()) == RECORD["parameters"]
    assert found == {name: RECORD[name] for name in CHECKED_FACTS}


def test_a_hub_base_is_checked_from_the_hub_cache_as_from_pretrained_reads_it(tiny_llama, recorded, tmp_path):
    """A hub id resolves through huggingface_hub (offline here, from a cache laid out as the hub client writes it):
    the record's model passes with its parameters counted from the downloaded headers, another is refused."""
    hub_cache.seed(tmp_path, "test/tiny-recorded", recorded)
    hub_cache.seed(tmp_path, "test/tiny-other", tiny_llama)
    script = (
        "import json, sys\n"
        "from finetune.base_record import BaseRecordError, check_base_record\n"
        "out = {'recorded': check_base_record('test/tiny-recorded', channel=False)[1]}\n"
        "try:\n"
        "    check_base_record('test/tiny-other', channel=False)\n"
        "except BaseRecordError as error:\n"
        "    out['other'] = str(error)\n"
        "print(json.dumps(out))\n"
    )
    env = {**os.environ, **hub_cache.offline_environment(tmp_path), **HUB_ENVIRONMENT, "PYTHONPATH": str(QLORA_DIR)}
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, check=True)
    result = json.loads(done.stdout.splitlines()[-1])
    assert result["recorded"]["parameters"] == RECORD["parameters"]
    assert result["other"].startswith("base model test/tiny-other is not the model ")
    assert "`make base-model MODEL=test/tiny-other FORCE=1`" in result["other"]
