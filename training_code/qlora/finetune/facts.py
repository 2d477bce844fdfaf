"""model_facts.json: what serving needs to know about the saved model, read back from the files just written.

The facts come from the folder alone (config.json, the safetensors headers and their index, the tokenizer
files), never from the arguments that produced it, so a registry entry built from them describes the model
that will be served. Standard library only: the stacks read FACTS_FILE and FACT_TYPES from this file.

A safetensors file is an 8-byte little-endian header length N, N bytes of JSON naming each tensor's dtype,
shape and data offsets (plus an optional `__metadata__` entry of strings), then the tensor bytes.
"""

from __future__ import annotations

import json
import math
import struct
from pathlib import Path
from typing import Any

FACTS_FILE = "model_facts.json"
# The file's schema: the registry (stacks/training/registry.py) writes each key as a package metadata entry.
FACT_TYPES = {
    "base_model": "str",
    "model_type": "str",
    "architecture": "str",
    "parameters": "int",
    "size_bytes": "int",
    "dtype": "str",
    "context_length": "int",
    "num_attention_heads": "int",
    "num_key_value_heads": "int",
    "chat_template": "bool",
}
INDEX_FILE = "model.safetensors.index.json"
# safetensors dtype names -> torch's
TORCH_DTYPES = {
    "F64": "float64",
    "F32": "float32",
    "F16": "float16",
    "BF16": "bfloat16",
    "F8_E4M3": "float8_e4m3fn",
    "F8_E5M2": "float8_e5m2",
    "I64": "int64",
    "I32": "int32",
    "I16": "int16",
    "I8": "int8",
    "U8": "uint8",
    "BOOL": "bool",
}
# The output embedding a tied checkpoint shares with the input embedding: counted once, as torch does.
TIED_OUTPUT_EMBEDDINGS = ("lm_head.weight",)


class ModelFactsError(ValueError):
    """The folder lacks what the facts are read from; str() names the file and the field."""


def header_length(prefix: bytes, name: str) -> int:
    """The header's length from a safetensors file's first 8 bytes (a remote copy is read in two ranges)."""
    if len(prefix) != 8:
        raise ModelFactsError(f"{name}: shorter than the 8-byte safetensors header length")
    return struct.unpack("<Q", prefix)[0]


def parse_header(raw: bytes) -> dict[str, dict[str, Any]]:
    """{tensor name: {"dtype", "shape", "data_offsets"}} from a header's JSON bytes."""
    header = json.loads(raw)
    header.pop("__metadata__", None)
    return header


def safetensors_header(path: Path) -> dict[str, dict[str, Any]]:
    """{tensor name: {"dtype", "shape", "data_offsets"}} of one .safetensors file, without its tensor bytes."""
    with path.open("rb") as handle:
        length = header_length(handle.read(8), path.name)
        return parse_header(handle.read(length))


def weight_files(model_dir: Path) -> list[Path]:
    """The weight files: those model.safetensors.index.json maps tensors to, else every *.safetensors."""
    index = model_dir / INDEX_FILE
    if index.is_file():
        names = sorted(set(json.loads(index.read_text(encoding="utf-8"))["weight_map"].values()))
        return [model_dir / name for name in names]
    files = sorted(model_dir.glob("*.safetensors"))
    if not files:
        raise ModelFactsError(f"{model_dir}: no *.safetensors file and no {INDEX_FILE}")
    return files


def tensors(model_dir: Path) -> dict[str, dict[str, Any]]:
    found: dict[str, dict[str, Any]] = {}
    for path in weight_files(model_dir):
        found.update(safetensors_header(path))
    return found


def _config_int(config: dict[str, Any], *names: str) -> int:
    for name in names:
        if isinstance(config.get(name), int):
            return config[name]
    raise ModelFactsError(f"config.json: no integer {' or '.join(names)}")


def _is_tied(config: dict[str, Any]) -> bool:
    """transformers leaves tie_word_embeddings out of config.json when it has the base default, true."""
    return bool(config.get("tie_word_embeddings", True))


def count_parameters(found: dict[str, dict[str, Any]], tied: bool) -> tuple[int, str]:
    """(parameters, torch dtype holding most of them) of header entries; a tied output embedding counts once."""
    counted = {name: entry for name, entry in found.items() if not (tied and name in TIED_OUTPUT_EMBEDDINGS)}
    by_dtype: dict[str, int] = {}
    for entry in counted.values():
        by_dtype[entry["dtype"]] = by_dtype.get(entry["dtype"], 0) + math.prod(entry["shape"])
    dtype = max(sorted(by_dtype), key=by_dtype.get)
    return sum(by_dtype.values()), TORCH_DTYPES.get(dtype, dtype.lower())


def parameter_count(model_dir: Path, config: dict[str, Any]) -> tuple[int, str]:
    """(parameters, torch dtype holding most of them) from the folder's headers."""
    return count_parameters(tensors(model_dir), _is_tied(config))


def has_chat_template(model_dir: Path) -> bool:
    """A template in tokenizer_config.json or beside it (chat_template.jinja / .json, as transformers saves)."""
    if any((model_dir / name).is_file() for name in ("chat_template.jinja", "chat_template.json")):
        return True
    config = model_dir / "tokenizer_config.json"
    return config.is_file() and bool(json.loads(config.read_text(encoding="utf-8")).get("chat_template"))


def model_facts(model_dir: str | Path, base_model: str) -> dict[str, Any]:
    """The facts of the saved model in `model_dir`; `base_model`: the model id train.py was given."""
    folder = Path(model_dir)
    config_file = folder / "config.json"
    if not config_file.is_file():
        raise ModelFactsError(f"{folder}: no config.json")
    config = json.loads(config_file.read_text(encoding="utf-8"))
    architectures = config.get("architectures") or []
    if not architectures or not config.get("model_type"):
        raise ModelFactsError("config.json: no model_type or architectures")
    parameters, dtype = parameter_count(folder, config)
    heads = _config_int(config, "num_attention_heads", "n_head")
    return {
        "base_model": base_model,
        "model_type": config["model_type"],
        "architecture": architectures[0],
        "parameters": parameters,
        "size_bytes": sum(path.stat().st_size for path in weight_files(folder)),
        "dtype": dtype,
        "context_length": _config_int(config, "max_position_embeddings", "n_positions"),
        "num_attention_heads": heads,
        "num_key_value_heads": config["num_key_value_heads"]
        if isinstance(config.get("num_key_value_heads"), int)
        else heads,
        "chat_template": has_chat_template(folder),
    }


def write_model_facts(model_dir: str | Path, base_model: str) -> dict[str, Any]:
    facts = model_facts(model_dir, base_model)
    (Path(model_dir) / FACTS_FILE).write_text(json.dumps(facts, indent=2) + "\n", encoding="utf-8")
    return facts
