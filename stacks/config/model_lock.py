"""The model lock, `config/<env>.model.json`: which approved model package version an environment serves.

Only the promotion (tools/promote_model) writes it, as deterministic JSON (sorted keys, 2-space indent, a
trailing newline), so a promotion's review diff is exactly what changes. Its presence turns serving on: the
Serving stack serves `model_prefix` (or the compiled model at `compiled_prefix`) from this environment's artifact
bucket. `facts` are the version's own (read from the model's files by the Training workflow and recorded in the
package's CustomerMetadataProperties); the synth checks the serving profile against them (served_model.py)
without reaching AWS.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

from .aws_models import shapes
from .errors import ConfigError
from .schema import describe, parse, setting

LOCK_SUFFIX = ".model.json"
S3_KEY_PREFIX = r"([A-Za-z0-9!_.*'()=-]+/)+"
INTEGER_FACTS = ("parameters", "size_bytes", "context_length", "num_attention_heads", "num_key_value_heads")


def _pattern(shape: str) -> str:
    """A string shape's pattern in botocore's SageMaker model (what SageMaker enforces)."""
    return shapes("sagemaker")[shape]["pattern"]


@dataclass(frozen=True)
class ModelFacts:
    """What serving needs to know of the model, as the Training workflow read it from the model's files."""

    base_model: str = setting(pattern=r"\S{1,256}", hint="hub id or S3 URI of the base model")
    model_type: str = setting(pattern=r"[a-z0-9_]{1,32}", hint="config.json model_type, e.g. llama")
    architecture: str = setting(pattern=r"[A-Za-z0-9_]{1,64}", hint="config.json architectures[0]")
    parameters: int = setting(ge=1)
    size_bytes: int = setting(ge=1)
    dtype: str = setting(pattern=r"[a-z0-9]{1,16}", hint="config.json torch_dtype, e.g. float16")
    context_length: int = setting(ge=1, hint="config.json max_position_embeddings")
    num_attention_heads: int = setting(ge=1)
    num_key_value_heads: int = setting(ge=1)
    chat_template: bool = setting()


@dataclass(frozen=True)
class ServingPin:
    """What the package was registered for: backend, the container image URI, the ml.inf2 types it lists."""

    backend: str = setting(pattern=r"[a-z0-9_]{1,32}")
    image: str = setting(pattern=r"\S{1,255}")
    instance_types: list[str] = setting(pattern=r"ml\.[a-z0-9-]+\.[a-z0-9]+")


@dataclass(frozen=True)
class Lineage:
    """Where the version comes from: its training run, dataset (and `_READY` marker version), code, and the
    version in the environment it was promoted from (null: registered by this environment's own workflow)."""

    training_job: str = setting(pattern=r"\S{1,63}")
    dataset: str = setting(pattern=r"\S{1,1024}")
    code_asset_hash: str = setting(pattern=r"[0-9a-f]{8,128}")
    dataset_marker_version_id: str | None = setting(None, pattern=r"\S{1,1024}")
    source_model_package_arn: str | None = setting(None, pattern=r"\S{1,2048}")


@dataclass(frozen=True)
class CompiledFacts:
    """The compiled model's shape and compiler, as its own config.json records them (LMI's partition: the `neuron`
    section transformers-neuronx's loader writes; the version's compiled_* metadata)."""

    tensor_parallel_degree: int = setting(ge=1)
    n_positions: int = setting(ge=1)
    batch_size: int = setting(ge=1)
    dtype: str = setting(pattern=r"[a-z0-9]{1,8}", hint="transformers-neuronx's amp name: f32, f16, bf16")
    compiler_version: str = setting(pattern=r"\d+(\.\d+)+(\+\S+)?", hint="neuronx-cc, e.g. 2.15.141.0+<build>")


@dataclass(frozen=True)
class ModelLock:
    """One environment's served model package version (config/<env>.model.json)."""

    model_package_arn: str = setting(hint="arn:aws:sagemaker:<region>:<account>:model-package/<group>/<n>")
    approval_status: str = setting(hint="ModelApprovalStatus: only Approved is served")
    model_prefix: str = setting(pattern=S3_KEY_PREFIX, hint="the merged model's key in this environment's bucket")
    facts: ModelFacts = setting()
    serving: ServingPin = setting()
    lineage: Lineage = setting()
    compiled_prefix: str | None = setting(None, pattern=S3_KEY_PREFIX, hint="the compiled model's or graph's key")
    compiled: CompiledFacts | None = setting(None, hint="the compiled model's own shape and compiler (LMI)")

    def check(self, source: str, path: str) -> None:
        """The ARN and the status as botocore's SageMaker model defines them."""
        arn_pattern = _pattern("ModelPackageArn")
        if not re.fullmatch(arn_pattern, self.model_package_arn):
            raise ConfigError(
                source,
                "model_package_arn",
                f"got {describe(self.model_package_arn)}; not a model package version ARN ({arn_pattern})",
            )
        statuses = shapes("sagemaker")["ModelApprovalStatus"]["enum"]
        if self.approval_status not in statuses:
            raise ConfigError(
                source, "approval_status", f"got {describe(self.approval_status)}; allowed: {', '.join(statuses)}"
            )

    @property
    def version(self) -> str:
        """How refusals name the version."""
        return self.model_package_arn


def lock_path(config_dir: Path, env_name: str) -> Path:
    return Path(config_dir) / f"{env_name}{LOCK_SUFFIX}"


def parse_lock(data: Any, source: str) -> ModelLock:
    """A lock from its JSON value; one ConfigError line for any bad field."""
    return parse(ModelLock, data, source=source)


def read_lock(path: Path) -> ModelLock:
    """config/<env>.model.json, validated."""
    source = path.as_posix()
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as err:
        raise ConfigError(source, f"line {err.lineno}", f"invalid JSON: {err.msg}") from None
    except UnicodeDecodeError:
        raise ConfigError(source, "<file>", "not UTF-8 text") from None
    return parse_lock(data, source)


def lock_text(lock: ModelLock) -> str:
    """The file's one form: sorted keys, 2-space indent, trailing newline."""
    return json.dumps(asdict(lock), sort_keys=True, indent=2) + "\n"


def facts_from_metadata(metadata: Mapping[str, str], source: str) -> ModelFacts:
    """The typed facts of a package's CustomerMetadataProperties (every value a string there)."""
    typed: dict[str, Any] = {}
    for fact in (f.name for f in fields(ModelFacts)):
        if fact not in metadata:
            raise ConfigError(
                source,
                f"CustomerMetadataProperties.{fact}",
                "missing; the version records no model facts (registered before the Training workflow read them "
                "from the model's files): register it again with the current workflow",
            )
        typed[fact] = _typed_fact(fact, metadata[fact], source)
    return parse(ModelFacts, typed, source=source, path="CustomerMetadataProperties")


def _typed_fact(fact: str, text: str, source: str) -> Any:
    if fact == "chat_template":
        if text not in ("true", "false"):
            raise ConfigError(source, f"CustomerMetadataProperties.{fact}", f"got {text!r}; expected true or false")
        return text == "true"
    if fact in INTEGER_FACTS:
        if not text.isdigit():
            raise ConfigError(source, f"CustomerMetadataProperties.{fact}", f"got {text!r}; expected an integer")
        return int(text)
    return text


COMPILED_METADATA = {  # CustomerMetadataProperties of a compiled version -> the lock's `compiled` field
    "compiled_tensor_parallel_degree": "tensor_parallel_degree",
    "compiled_n_positions": "n_positions",
    "compiled_batch_size": "batch_size",
    "compiled_dtype": "dtype",
    "compiler_version": "compiler_version",
}


def compiled_from_metadata(metadata: Mapping[str, str], source: str) -> CompiledFacts | None:
    """The typed `compiled` section of a version that records its compiled shape, else None."""
    if not any(key in metadata for key in COMPILED_METADATA):
        return None
    typed: dict[str, Any] = {}
    for key, field_name in COMPILED_METADATA.items():
        text = metadata.get(key)
        if text is None:
            raise ConfigError(source, f"CustomerMetadataProperties.{key}", "missing beside the other compiled facts")
        typed[field_name] = int(text) if text.isdigit() and field_name not in ("dtype", "compiler_version") else text
    return parse(CompiledFacts, typed, source=source, path="CustomerMetadataProperties")
