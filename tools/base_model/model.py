"""The tool's vocabulary: a refusal, and what was read from a model's files before it becomes a record."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from stacks.code_contract.loader import load_code_module
from stacks.paths import QLORA_CODE

# The training code's own reader of safetensors headers: the record counts parameters as the run that trains on
# the model will (a tied output embedding once), with one implementation.
FACTS = load_code_module(QLORA_CODE, "finetune/facts.py")
TOKENIZER_CONFIG = "tokenizer_config.json"
CHAT_TEMPLATE_FILES = ("chat_template.jinja", "chat_template.json")


class Refused(Exception):
    """The record cannot be written; the message is the one line that says why and what to do."""


@dataclass(frozen=True)
class ModelFiles:
    """What a reader found: config.json, the weights' headers, the tokenizer's template, where and at which commit."""

    source: str  # the hub id, s3:// URI or folder, as the record names it
    config_name: str  # config.json's location, for the one-line refusals
    config: dict[str, Any]
    tensors: dict[str, dict[str, Any]] | None  # {name: {"dtype", "shape"}} of the safetensors; None: none found
    chat_template: bool | None  # None: the tokenizer's files are not there
    revision: str | None = None
    gated: bool = False


def parse_json(raw: bytes | str, shown: str) -> dict[str, Any]:
    """A JSON object from a model's file (`shown`: where it is, for the one-line refusal)."""
    try:
        value = json.loads(raw)
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
        raise Refused(f"{shown}: cannot be read as a JSON object ({err}); nothing written") from None
    if not isinstance(value, dict):
        raise Refused(f"{shown}: cannot be read as a JSON object (it is a {type(value).__name__}); nothing written")
    return value


def chat_template_in(names: set[str], tokenizer_config: dict[str, Any] | None) -> bool | None:
    """A template beside the tokenizer (chat_template.jinja / .json, as transformers saves it) or inside
    tokenizer_config.json; None when neither file is there to say."""
    if names & set(CHAT_TEMPLATE_FILES):
        return True
    if tokenizer_config is None:
        return None
    return bool(tokenizer_config.get("chat_template"))
