"""A base-model record from what a reader found: config.json's fields, the parameters the weights hold.

Every field the record needs comes from config.json, with the defaults transformers applies when a field is left
out: num_key_value_heads (the attention heads), head_dim (hidden_size / num_attention_heads) and
tie_word_embeddings, whose default is the model class's own (LlamaConfig: false, SmolLM3Config: true), never one
guess for all. The parameters are the safetensors headers' (a tied output embedding once); without safetensors,
the model transformers builds from config.json on the meta device.
"""

from __future__ import annotations

from typing import Any

from stacks.config.base_model_record import BaseModelRecord, parse_record
from tools.base_model.model import FACTS, ModelFiles, Refused

REQUIRED = (
    ("hidden_size", "the model's width"),
    ("num_hidden_layers", "its depth"),
    ("num_attention_heads", "its attention heads"),
    ("intermediate_size", "its MLP width"),
    ("vocab_size", "its vocabulary"),
    ("max_position_embeddings", "the context it is built for"),
)


def _integer(files: ModelFiles, name: str, why: str) -> int:
    value = files.config.get(name)
    if value is None:
        raise Refused(f"{files.config_name}: {name}: missing ({why}); a base-model record needs it, nothing written")
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise Refused(f"{files.config_name}: {name}: got {value!r}; expected a positive integer, nothing written")
    return value


def _optional_integer(files: ModelFiles, name: str, default: int) -> int:
    return default if files.config.get(name) is None else _integer(files, name, "")


def _identity(files: ModelFiles) -> tuple[str, str]:
    model_type, architectures = files.config.get("model_type"), files.config.get("architectures")
    if not isinstance(model_type, str) or not model_type:
        raise Refused(f"{files.config_name}: model_type: missing; a base-model record needs it, nothing written")
    if not isinstance(architectures, list) or not architectures or not isinstance(architectures[0], str):
        raise Refused(
            f"{files.config_name}: architectures: missing; a base-model record needs its first entry, nothing written"
        )
    return model_type, architectures[0]


def transformers_config(files: ModelFiles) -> Any:
    """config.json as transformers reads it (its class fills what the file leaves out)."""
    from transformers import CONFIG_MAPPING
    from transformers.utils import logging

    logging.set_verbosity_error()  # its notes on old rope keys are about loading weights, not about these facts
    model_type = files.config["model_type"]
    if model_type not in CONFIG_MAPPING:
        raise Refused(
            f"{files.config_name}: model_type: {model_type!r} is not a transformers model type; the record reads "
            "its defaults from transformers' config class, nothing written"
        )
    return CONFIG_MAPPING[model_type].from_dict(files.config)


def tied(files: ModelFiles) -> bool:
    """config.json's tie_word_embeddings, else its model class's default."""
    value = files.config.get("tie_word_embeddings")
    if isinstance(value, bool):
        return value
    return bool(transformers_config(files).tie_word_embeddings)


def meta_parameters(files: ModelFiles) -> int:
    """The parameters of the model transformers builds from config.json on the meta device (no weights), each
    shared tensor once. torch's meta device rather than accelerate's init_empty_weights: under transformers 5 the
    latter leaves a tied output embedding a second tensor (Llama-3.2-1B: 1,498,482,688 instead of 1,235,814,400)."""
    import torch
    from transformers import AutoModelForCausalLM

    config = transformers_config(files)
    try:
        with torch.device("meta"):
            model = AutoModelForCausalLM.from_config(config)
    except ValueError:  # AutoModelForCausalLM knows no class for the config
        raise Refused(
            f"{files.config_name}: model_type: transformers has no causal language model for "
            f"{files.config['model_type']!r}; a base model generates text, nothing written"
        ) from None
    return sum(parameter.numel() for parameter in model.parameters())


def _dtype(files: ModelFiles, weights_dtype: str | None) -> str:
    """torch_dtype (transformers 4) or dtype (transformers 5), else what most of the weights are stored as."""
    for name in ("torch_dtype", "dtype"):
        if isinstance(files.config.get(name), str):
            return files.config[name].removeprefix("torch.")
    if weights_dtype is None:
        raise Refused(
            f"{files.config_name}: torch_dtype: missing and no safetensors to read it from; a base-model record "
            "needs the weights' dtype, nothing written"
        )
    return weights_dtype


def record_from(files: ModelFiles, hub_id: str) -> BaseModelRecord:
    """The record of `files`, a copy of (or the hub repository) `hub_id`; Refused names a missing field."""
    model_type, architecture = _identity(files)
    sizes = {name: _integer(files, name, why) for name, why in REQUIRED}
    heads = sizes["num_attention_heads"]
    is_tied = tied(files)
    weights_dtype = None
    if files.tensors:
        parameters, weights_dtype = FACTS.count_parameters(files.tensors, is_tied)
    else:
        parameters = meta_parameters(files)
    values = {
        "hub_id": hub_id,
        "source": files.source,
        "revision": files.revision,
        "gated": files.gated,
        "model_type": model_type,
        "architecture": architecture,
        "parameters": parameters,
        "dtype": _dtype(files, weights_dtype),
        "context_length": sizes.pop("max_position_embeddings"),
        **sizes,
        "num_key_value_heads": _optional_integer(files, "num_key_value_heads", heads),
        "head_dim": _optional_integer(files, "head_dim", sizes["hidden_size"] // heads),
        "tie_word_embeddings": is_tied,
        "chat_template": files.chat_template,
    }
    return parse_record(values, source=f"the record of {files.source}")
