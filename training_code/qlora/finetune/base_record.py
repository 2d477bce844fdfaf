"""The base model's record against the weights train.py is about to load: other weights are refused first.

The environment's serving profile was checked at synth against its base's record (config/models/<name>.yaml). The
Training stack passes the facts a run can check as the job's Environment entry RECORD_VARIABLE (JSON); before any
weight is loaded, they are compared with the base train.py resolved: its config as transformers reads it (class
defaults included) and its parameter count from the safetensors headers (finetune.facts), built on the meta device
where the base has none. A base that differs (another model under the hub id, a copy of another size under
base-models/, weights changed after the record was written) would train and merge, then fail or misfit only when
served. Standard library at import (the stacks read the names from this file).
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

RECORD_VARIABLE = "BASE_MODEL_RECORD"
# The record's facts a run checks, named as in config/models/<name>.yaml (stacks/config/base_model_record.py).
CHECKED_FACTS = (
    "model_type",
    "architecture",
    "parameters",
    "context_length",
    "hidden_size",
    "num_hidden_layers",
    "num_attention_heads",
    "num_key_value_heads",
    "head_dim",
    "intermediate_size",
    "vocab_size",
    "tie_word_embeddings",
)
# What the record names beside its facts: its file, and the hub id it describes when the job downloads by it.
RECORD_FILE, HUB_ID = "record", "hub_id"
# The files a hub base's parameter count is read from (what from_pretrained downloads anyway).
WEIGHT_PATTERNS = ("config.json", "*.safetensors", "model.safetensors.index.json")


class BaseRecordError(ValueError):
    """The resolved base is not the model its record describes; str() names each fact and the fixes."""


def config_facts(model_id: str) -> tuple[dict[str, Any], Any]:
    """(facts of CHECKED_FACTS but parameters, the transformers config) of the base, as transformers reads its
    config.json; a fact the config does not have is left out (not checked)."""
    from transformers import AutoConfig

    config = AutoConfig.from_pretrained(model_id)
    text = config.get_text_config()
    heads = getattr(text, "num_attention_heads", None)
    hidden = getattr(text, "hidden_size", None)
    found = {
        "model_type": config.model_type,
        "architecture": (config.architectures or [None])[0],
        "context_length": getattr(text, "max_position_embeddings", None),
        "hidden_size": hidden,
        "num_hidden_layers": getattr(text, "num_hidden_layers", None),
        "num_attention_heads": heads,
        "num_key_value_heads": getattr(text, "num_key_value_heads", None) or heads,
        "head_dim": getattr(text, "head_dim", None) or (hidden // heads if hidden and heads else None),
        "intermediate_size": getattr(text, "intermediate_size", None),
        "vocab_size": getattr(text, "vocab_size", None),
        "tie_word_embeddings": bool(getattr(config, "tie_word_embeddings", True)),
    }
    return {name: value for name, value in found.items() if value is not None}, config


def parameter_count(model_id: str, config: Any, tied: bool) -> int:
    """From the safetensors headers (a hub base's weights are fetched into the cache from_pretrained reads), else
    the model built on the meta device."""
    from .facts import ModelFactsError
    from .facts import parameter_count as header_count

    folder = Path(model_id)
    if not folder.is_dir():
        from huggingface_hub import snapshot_download

        folder = Path(snapshot_download(model_id, allow_patterns=list(WEIGHT_PATTERNS)))
    try:
        return header_count(folder, {"tie_word_embeddings": tied})[0]
    except ModelFactsError:
        from accelerate import init_empty_weights
        from transformers import AutoModelForCausalLM

        with init_empty_weights():
            model = AutoModelForCausalLM.from_config(config)
        return sum(p.numel() for p in model.parameters())  # a tied weight is one parameter


def _differences(expected: Mapping[str, Any], found: Mapping[str, Any]) -> list[str]:
    return [
        f"{name} is {found[name]!r}, the record says {expected[name]!r}"
        for name in CHECKED_FACTS
        if name in expected and name in found and found[name] != expected[name]
    ]


def _refusal(expected: Mapping[str, Any], differences: list[str], model_id: str, channel: bool) -> BaseRecordError:
    record = expected.get(RECORD_FILE, "its record")
    model = f"s3://<artifact bucket>/base-models/{Path(record).stem}/" if channel else model_id
    described = f" ({expected[HUB_ID]})" if HUB_ID in expected else ""
    return BaseRecordError(
        f"base model {model_id} is not the model {record} describes: {'; '.join(differences)}; rewrite the record "
        f"from these weights (`make base-model MODEL={model} FORCE=1`) or train on the model it describes{described}"
    )


def check_base_record(
    model_id: str, *, channel: bool, environ: Mapping[str, str] | None = None
) -> tuple[str, dict[str, Any]] | None:
    """Compare the base with the record RECORD_VARIABLE holds (none: nothing to check); the config's facts first,
    so a wrong model is refused before its weights are fetched. `channel`: the base is the job's `model` channel.
    Returns (the record's file, the facts found)."""
    environ = os.environ if environ is None else environ
    if not environ.get(RECORD_VARIABLE):
        return None
    expected = json.loads(environ[RECORD_VARIABLE])
    found, config = config_facts(model_id)
    differences = _differences(expected, found)
    if not differences and "parameters" in expected:
        found["parameters"] = parameter_count(model_id, config, found["tie_word_embeddings"])
        differences = _differences(expected, found)
    if differences:
        raise _refusal(expected, differences, model_id, channel)
    return expected.get(RECORD_FILE, RECORD_VARIABLE), found
