"""An environment trains a model its serving profile can serve: the training base against the profile.

The base is the catalog record (config/models/, model_catalog.py) that training.hyperparameters.model_id or
training.base_model_key names. Its facts go through the rules a promoted version's facts go through
(served_model.py), so a profile that could never serve what the environment trains fails the synth before any
run, with one line naming the base, the field and the fix.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .base_model_record import MODELS_DIR
from .model_catalog import BASE_MODEL_KEY, MODEL_ID, is_hub_id
from .served_model import ModelShape, Subject, check_memory, check_shape

if TYPE_CHECKING:
    from .app_config import AppConfig

_FACTS = ("model_type", "parameters", "context_length", "num_attention_heads", "num_key_value_heads")


def base_field(config: AppConfig) -> str:
    """The field that names the base: the hub id when it is one, else the copy's key."""
    model_id = config.training.hyperparameters.get("model_id")
    return MODEL_ID if is_hub_id(model_id) else BASE_MODEL_KEY


def check_trained_model(config: AppConfig) -> None:
    """The serving profile fits the training base's record (the loader refuses a served base without one)."""
    base = config.base_model
    if config.serving is None or base is None:
        return
    record = base.record
    shape = ModelShape(
        model_type=record.model_type,
        architecture=record.architecture,
        parameters=record.parameters,
        context_length=record.context_length,
        num_attention_heads=record.num_attention_heads,
        num_key_value_heads=record.num_key_value_heads,
    )
    name = f"the training base {record.hub_id} (config/{MODELS_DIR}/{base.name}.yaml)"
    subject = Subject(name, config.source, dict.fromkeys(_FACTS, base_field(config)))
    check_shape(config.serving, shape, subject, config.source)
    # whether a version brings a precompiled graph is the promotion's: only the weights' fit is checked here
    check_memory(config.serving, shape, subject, config.source, compiled=None)


def model_family(config: AppConfig) -> str | None:
    """The family of what the environment trains (and so serves), or None without a recorded base."""
    return config.base_model.record.family if config.base_model is not None else None
