"""Typed, validated, per-environment configuration: loaded once in app.py, handed to stacks."""

from .app_config import AppConfig
from .data import DataConfig
from .errors import ConfigError
from .loader import load_config
from .pruning import PruningConfig
from .serving import ServingConfig
from .training import TrainingConfig

__all__ = ["AppConfig", "ConfigError", "DataConfig", "PruningConfig", "ServingConfig", "TrainingConfig", "load_config"]
