"""The model catalog, `config/models/*.yaml`, and which record an environment's training base is.

An environment trains (and so serves) the model `training.hyperparameters.model_id` names (a record's `hub_id`)
or, offline, the copy `training.base_model_key` names (`base-models/<record name>/`). Its record is the only
source of the model's facts at synth: the serving profile's size is read from it and never typed in
config/<env>.yaml, so a profile cannot drift from the model it was built for. Records are written by
`make base-model MODEL=...` (tools/base_model) and reviewed like the model lock.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..paths import relative
from .base_model_record import MODELS_DIR, RECORD_NAME, BaseModelRecord, key_folder, parse_record, record_name
from .errors import ConfigError
from .training import TrainingConfig
from .yaml_file import read_yaml

MODEL_ID = "training.hyperparameters.model_id"
BASE_MODEL_KEY = "training.base_model_key"
# The serving fields the record supplies: a value typed into config/<env>.yaml is refused.
FROM_RECORD = ("model_parameters_billions", "base_model")


@dataclass(frozen=True)
class BaseModel:
    """One catalog entry: the record and the file it was read from (what messages name)."""

    name: str
    source: str
    record: BaseModelRecord

    @property
    def key_folder(self) -> str:
        return key_folder(self.name)


@dataclass(frozen=True)
class TrainingBase:
    """The field that names an environment's base, its value, and the record (None: not in the catalog)."""

    field: str
    value: str | None
    model: BaseModel | None


def read_catalog(config_dir: str | Path) -> dict[str, BaseModel]:
    """Every record under config_dir/models/, by name; a bad record fails in one line naming its file."""
    found: dict[str, BaseModel] = {}
    for path in sorted((Path(config_dir) / MODELS_DIR).glob("*.yaml")):
        source = relative(path)
        if not re.fullmatch(RECORD_NAME, path.stem):
            raise ConfigError(source, "<file name>", f"must match {RECORD_NAME}.yaml (a folder under base-models/)")
        record = parse_record(read_yaml(path), source)
        if record_name(record.hub_id) != path.stem:
            raise ConfigError(
                source,
                "hub_id",
                f"got {record.hub_id!r}, whose record is {record_name(record.hub_id)}.yaml: rename the file or "
                "write it again with `make base-model`",
            )
        found[path.stem] = BaseModel(path.stem, source, record)
    return found


def is_hub_id(model_id: object) -> bool:
    """training.hyperparameters.model_id names a hub model; a path names a folder in the job (the `model` channel
    under training.base_model_key)."""
    return isinstance(model_id, str) and not model_id.startswith("/")


def training_base(raw_training: Any, catalog: Mapping[str, BaseModel]) -> TrainingBase:
    """The base a `training:` section (as read from YAML) names: a hub id wins over a copy's key, as in train.py."""
    training = raw_training if isinstance(raw_training, Mapping) else {}
    hyperparameters = training.get("hyperparameters")
    model_id = hyperparameters.get("model_id") if isinstance(hyperparameters, Mapping) else None
    if is_hub_id(model_id):
        found = next((m for m in catalog.values() if m.record.hub_id == model_id), None)
        return TrainingBase(MODEL_ID, model_id, found)
    key = training.get("base_model_key")
    if isinstance(key, str):
        found = next((m for m in catalog.values() if m.key_folder == key), None)
        return TrainingBase(BASE_MODEL_KEY, key, found)
    return TrainingBase(MODEL_ID, None, None)


def with_base_facts(raw: Any, source: str, base: TrainingBase) -> Any:
    """`raw` (config/<env>.yaml's value) with the serving section's size read from the base's record.

    One ConfigError line when the file types what the record says, or serves a base with no record."""
    if not isinstance(raw, Mapping) or not isinstance(raw.get("serving"), Mapping):
        return raw
    serving = raw["serving"]
    for name in FROM_RECORD:
        if name in serving:
            where = base.model.source if base.model is not None else "config/models/<base model>.yaml"
            raise ConfigError(
                source,
                f"serving.{name}",
                f"remove this line; the base model's size is read from its record ({where}), never typed here",
            )
    if base.model is None:
        raise ConfigError(source, base.field, _no_record(base))
    record = base.model.record
    facts = {"model_parameters_billions": record.parameters / 1e9, "base_model": record.hub_id}
    return {**raw, "serving": {**serving, **facts}}


def check_gated_access(base: TrainingBase, training: TrainingConfig, source: str) -> None:
    """A base its record says is gated downloads only with a token that has access: the config names the secret
    holding one, or trains on a copy in the bucket (training.base_model_key); else the job's first hub request
    would fail, hours of queueing later, with the hub's 401."""
    model = base.model
    if model is None or not model.record.gated or base.field != MODEL_ID:
        return
    if training.hub_token_secret is not None or training.base_model_key is not None:
        return
    raise ConfigError(
        source,
        MODEL_ID,
        f"got {base.value!r}, gated on the hub ({model.source}: gated: true), and the training job has no token: "
        "set training.hub_token_secret: <secret ARN> (a Secrets Manager secret holding a hub token with access) "
        f"or copy the weights into the bucket with `make base-model MODEL={base.value} UPLOAD={Path(source).stem}`",
    )


def _no_record(base: TrainingBase) -> str:
    if base.value is None:
        return (
            "missing; the serving profile is checked against the base model's record: name a recorded model "
            f"(config/models/) here or in {BASE_MODEL_KEY}"
        )
    model = base.value if base.field == MODEL_ID else f"s3://<bucket>/{base.value}"
    return (
        f"got {base.value!r}; no record in config/models/ says what it is, so nothing can check that serving can "
        f"serve it: run `make base-model MODEL={model}` and commit the record it writes"
    )
