"""A model folder on this machine: config.json, the safetensors headers (never the tensors), the tokenizer's files."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tools.base_model.model import FACTS, TOKENIZER_CONFIG, ModelFiles, Refused, chat_template_in, parse_json


def read_json(path: Path, shown: str) -> dict[str, Any]:
    return parse_json(path.read_bytes(), shown)


def _tensors(folder: Path, shown: str) -> dict[str, dict[str, Any]] | None:
    """Every tensor's dtype and shape from the headers, or None where the folder holds no safetensors."""
    if not (folder / FACTS.INDEX_FILE).is_file() and not any(folder.glob("*.safetensors")):
        return None
    try:
        return FACTS.tensors(folder)
    except (OSError, ValueError, KeyError) as err:
        raise Refused(f"{shown}: its safetensors headers cannot be read ({err}); nothing written") from None


def read_folder(folder: Path, shown: str, *, revision: str | None, gated: bool) -> ModelFiles:
    """The facts of the model saved in `folder` (`shown`: how the record and messages name it)."""
    config_file = folder / "config.json"
    if not config_file.is_file():
        raise Refused(f"{shown}: no config.json; give a folder holding a saved model (config.json, *.safetensors)")
    tokenizer_file = folder / TOKENIZER_CONFIG
    tokenizer_config = read_json(tokenizer_file, f"{shown}/{TOKENIZER_CONFIG}") if tokenizer_file.is_file() else None
    names = {path.name for path in folder.iterdir()}
    return ModelFiles(
        source=shown,
        config_name=f"{shown}/config.json",
        config=read_json(config_file, f"{shown}/config.json"),
        tensors=_tensors(folder, shown),
        chat_template=chat_template_in(names, tokenizer_config),
        revision=revision,
        gated=gated,
    )
