"""Physically pruned copies of a super-network, and their ``save_pretrained`` export.

Heads and units are kept as prefixes, so pruning slices the first ``h * head_size`` rows of Q/K/V (and
columns of the attention output projection), the first ``u`` FFN units, and drops the trailing layers.
When every kept layer has all heads and the same unit count the result is a plain ``BertConfig`` model;
otherwise (or with a mean-pooling head) it is a ``PrunedBertForSequenceClassification`` whose code
travels with the weights.
"""

from __future__ import annotations

import copy
import json
import shutil
from pathlib import Path

import torch
from transformers import BertForSequenceClassification

from .pruned_bert import PrunedBertForSequenceClassification
from .search_space import SubnetConfig

EXPORT_METADATA = "nas_export.json"


def is_plain_bert(super_config, subnet: SubnetConfig) -> bool:
    """A plain ``BertForSequenceClassification`` computes it: [CLS] head, all heads, one FFN width."""
    if getattr(super_config, "classifier_pooling", "cls") != "cls":
        return False
    return all(h == super_config.num_attention_heads for h in subnet.heads) and len(set(subnet.units)) <= 1


def pruned_config(super_config, subnet: SubnetConfig):
    config = copy.deepcopy(super_config)
    config.num_hidden_layers = subnet.num_layers
    if is_plain_bert(super_config, subnet):
        config.intermediate_size = subnet.units[0] if subnet.units else super_config.intermediate_size
        config.architectures = ["BertForSequenceClassification"]
    else:
        config.layer_num_heads = list(subnet.heads)
        config.layer_intermediate_sizes = list(subnet.units)
        config.architectures = ["PrunedBertForSequenceClassification"]
    return config


def _slice_layer(state: dict, prefix: str, heads: int, units: int, head_size: int) -> dict:
    inner = heads * head_size
    out = {}
    for name, tensor in state.items():
        if not name.startswith(prefix):
            continue
        local = name[len(prefix) :]
        if local.startswith("attention.self."):
            if heads == 0:
                continue
            tensor = tensor[:inner]
        elif local == "attention.output.dense.weight":
            tensor = tensor[:, :inner]
        elif local.startswith("intermediate.dense."):
            tensor = tensor[:units]
        elif local == "output.dense.weight":
            tensor = tensor[:, :units]
        out[name] = tensor.clone()
    return out


def pruned_state_dict(super_model, subnet: SubnetConfig) -> dict:
    state = super_model.state_dict()
    base = super_model.base_model_prefix
    head_size = super_model.config.hidden_size // super_model.config.num_attention_heads
    layer_prefix = f"{base}.encoder.layer."
    out = {k: v.clone() for k, v in state.items() if not k.startswith(layer_prefix)}
    for i, (heads, units) in enumerate(zip(subnet.heads, subnet.units, strict=True)):
        out.update(_slice_layer(state, f"{layer_prefix}{i}.", heads, units, head_size))
    return out


def build_pruned_model(super_model, subnet: SubnetConfig):
    """A physically smaller model computing the same function as the masked sub-network."""
    config = pruned_config(super_model.config, subnet)
    model_class = (
        BertForSequenceClassification
        if is_plain_bert(super_model.config, subnet)
        else PrunedBertForSequenceClassification
    )
    with torch.device("meta"):  # no time spent initialising weights that are overwritten next
        model = model_class(config)
    missing, unexpected = model.load_state_dict(pruned_state_dict(super_model, subnet), strict=False, assign=True)
    if missing or unexpected:
        raise RuntimeError(f"pruned weights do not fit: missing {missing}, unexpected {unexpected}")
    for name, buffer in list(model.named_buffers()):  # non-persistent buffers (position ids) are not in a state dict
        if buffer.is_meta:
            owner, _, attribute = name.rpartition(".")
            model.get_submodule(owner).register_buffer(
                attribute, super_model.get_buffer(name).clone(), persistent=False
            )
    return model.eval()


def save_pruned_model(
    model, tokenizer, output_dir: str | Path, metadata: dict, inference_code_dir: str | Path | None = None
) -> Path:
    """``save_pretrained`` plus tokenizer, export metadata and, optionally, the serving handler's code."""
    output_dir = Path(output_dir)
    output_dir.mkdir(parents=True, exist_ok=True)
    if isinstance(model, PrunedBertForSequenceClassification):
        type(model).register_for_auto_class("AutoModelForSequenceClassification")
    model.save_pretrained(output_dir)
    tokenizer.save_pretrained(output_dir)
    (output_dir / EXPORT_METADATA).write_text(json.dumps(metadata, indent=2))
    if inference_code_dir is not None:
        shutil.copytree(inference_code_dir, output_dir / "code", dirs_exist_ok=True)
    return output_dir


def count_model_parameters(model: torch.nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())
