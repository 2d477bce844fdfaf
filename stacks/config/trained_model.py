"""An environment trains a model its serving profile can serve: the training base against the profile.

The base is training.hyperparameters.model_id (a hub id) or, offline, the model whose copy training.base_model_key
names (base-models/<hub repository name, lower case>/). Its facts come from the backends' base-model records
(stacks/serving/backends/base_models.py) and go through the rules a promoted version's facts go through
(served_model.py), so a profile that could never serve what the environment trains fails the synth before any
run, with one line naming the base, the field and the fix.
"""

from __future__ import annotations

from typing import Any

from ..serving.backends.base_models import BASE_MODELS, BaseModel, base_model_of
from .errors import ConfigError
from .served_model import ModelShape, Subject, check_memory, check_shape

RECORDS = "stacks/serving/backends/base_models.py"


def training_base(config: Any) -> tuple[str, str | None, BaseModel | None]:
    """(the field naming the base, its value, its record)."""
    training = config.training
    model_id = training.hyperparameters.get("model_id")
    if model_id is not None and not model_id.startswith("/"):
        return "training.hyperparameters.model_id", model_id, base_model_of(model_id, None)
    return "training.base_model_key", training.base_model_key, base_model_of(None, training.base_model_key)


def check_trained_model(config: Any) -> None:
    """The training base is a recorded model, and the serving profile fits it."""
    if config.serving is None:
        return
    field, value, record = training_base(config)
    if value is None:
        return
    if record is None:
        known = ", ".join(sorted(m.hub_id if "/" in m.hub_id else m.key_folder for m in BASE_MODELS.values()))
        raise ConfigError(
            config.source,
            field,
            f"got {value!r}; no base-model record says what it is ({RECORDS}: {known}), so nothing can check that "
            "serving can serve it: add its config.json facts there",
        )
    shape = ModelShape(
        model_type=record.model_type,
        architecture=record.architecture,
        parameters=record.parameters,
        context_length=record.context_length,
        num_attention_heads=record.num_attention_heads,
        num_key_value_heads=record.num_key_value_heads,
    )
    subject = Subject(f"the training base {record.hub_id} ({RECORDS})", config.source, dict.fromkeys(_FACTS, field))
    check_shape(config.serving, shape, subject, config.source)
    # whether a version brings a precompiled graph is the promotion's: only the weights' fit is checked here
    check_memory(config.serving, shape, subject, config.source, compiled=None)


_FACTS = ("model_type", "parameters", "context_length", "num_attention_heads", "num_key_value_heads")


def model_family(config: Any) -> str | None:
    """The family of what the environment trains (and so serves), or None without a recorded base."""
    record = training_base(config)[2]
    return record.family if record is not None else None
