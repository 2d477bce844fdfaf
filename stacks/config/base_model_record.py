"""A base-model record, `config/models/<name>.yaml`: one model's config.json facts, as data.

`make base-model MODEL=<hub id | local folder | s3://...>` (tools/base_model) reads them from the model's own files
and writes the record; it is reviewed and committed like the model lock, and the synth reads nothing else about a
base model. An environment names its base by `training.hyperparameters.model_id` (the record's `hub_id`) or, for a
copy in its bucket, `training.base_model_key` (`base-models/<name>/`, the record's file name).
Standard library and the config schema only: validation runs before aws_cdk is imported.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

from .schema import parse, setting

MODELS_DIR = "models"  # under config/
RECORD_NAME = r"[a-z0-9][a-z0-9._-]{0,95}"  # also a folder under base-models/ in the bucket


@dataclass(frozen=True, kw_only=True)
class BaseModelRecord:
    """What serving and training need to know of a base model before any version of it is trained."""

    hub_id: str = setting(pattern=r"[\w.-]+(/[\w.-]+)?", hint="the id training.hyperparameters.model_id names")
    source: str = setting(pattern=r"\S{1,1024}", hint="where the facts were read: a hub id, s3:// URI or folder")
    revision: str | None = setting(None, pattern=r"[\w./-]{1,128}", hint="the hub commit the facts were read at")
    gated: bool = setting(False, hint="the hub asks for a token with access (training needs a secret or a copy)")
    model_type: str = setting(pattern=r"[a-z0-9_]{1,32}", hint="config.json model_type, e.g. llama")
    architecture: str = setting(pattern=r"[A-Za-z0-9_]{1,64}", hint="config.json architectures[0]")
    parameters: int = setting(ge=1, hint="from the safetensors headers, else built on the meta device")
    dtype: str = setting(pattern=r"[a-z0-9]{1,16}", hint="config.json torch_dtype, e.g. bfloat16")
    context_length: int = setting(ge=1, hint="config.json max_position_embeddings")
    hidden_size: int = setting(ge=1)
    num_hidden_layers: int = setting(ge=1)
    num_attention_heads: int = setting(ge=1)
    num_key_value_heads: int = setting(ge=1)
    head_dim: int = setting(ge=1, hint="config.json head_dim, else hidden_size / num_attention_heads")
    intermediate_size: int = setting(ge=1)
    vocab_size: int = setting(ge=1)
    tie_word_embeddings: bool = setting()
    chat_template: bool | None = setting(None, hint="a chat template ships with the tokenizer; null: not read")

    @property
    def billions(self) -> float:
        return self.parameters / 1e9

    @property
    def family(self) -> str:
        """Models that share every serving-relevant fact (copies of one model under two hub ids)."""
        return f"{self.model_type}-{self.billions:.2f}b-{self.context_length}"


def record_name(hub_id: str) -> str:
    """config/models/<name>.yaml and base-models/<name>/: the hub repository's name, lower case."""
    return hub_id.rsplit("/", 1)[-1].lower()


def key_folder(name: str) -> str:
    return f"base-models/{name}/"


def record_dict(record: BaseModelRecord) -> dict[str, Any]:
    """The record in field order, as the tool writes it."""
    return {f.name: getattr(record, f.name) for f in fields(BaseModelRecord)}


def parse_record(data: Any, source: str) -> BaseModelRecord:
    """A record from its YAML value; one ConfigError line for any bad field."""
    return parse(BaseModelRecord, data, source=source)
