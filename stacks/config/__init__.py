"""Typed, validated, per-environment configuration: loaded once in app.py, handed to stacks.

The names below load on first use (PEP 562), so `stacks.config.schema` and `stacks.config.errors` import
without the whole schema: a serving backend's own config module (stacks/serving/backends/<name>/config.py)
uses them, and the serving section is built from those modules.
"""

from __future__ import annotations

import importlib
from typing import Any

_HOMES = {
    "AppConfig": ".app_config",
    "ConfigError": ".errors",
    "DataConfig": ".data",
    "DeployConfig": ".deploy",
    "PruningConfig": ".pruning",
    "ServingConfig": ".serving",
    "TrainingConfig": ".training",
    "load_config": ".loader",
}
__all__ = sorted(_HOMES)


def __getattr__(name: str) -> Any:
    if name not in _HOMES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(_HOMES[name], __name__), name)
