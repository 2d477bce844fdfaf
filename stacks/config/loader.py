"""Find, read and validate `config/<env>.yaml`; every failure is one ConfigError line."""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from .app_config import AppConfig
from .deploy import ENV_NAME_PATTERN, Stage, deploy_chain
from .errors import ConfigError
from .model_catalog import BaseModel, check_gated_access, read_catalog, training_base, with_base_facts
from .model_lock import lock_path, read_lock
from .rehearsal import check_rehearsal
from .schema import describe, parse
from .served_model import with_model
from .trained_model import check_trained_model
from .yaml_file import read_yaml


def available_envs(config_dir: Path) -> list[str]:
    return sorted(p.stem for p in config_dir.glob("*.yaml"))


def load_config(env_name: Any, config_dir: str | Path = "config", *, served: bool = True) -> AppConfig:
    """Load and validate one environment; the result is frozen and safe to share between stacks. `served`
    False: the profile alone, without config/<env>.model.json (what a promotion checks a new version against)."""
    config_dir = Path(config_dir)
    if not isinstance(env_name, str) or not re.fullmatch(ENV_NAME_PATTERN, env_name):
        raise ConfigError(
            "context", "env", f"got {describe(env_name)}; must match {ENV_NAME_PATTERN} (e.g. -c env=dev)"
        )
    path = config_dir / f"{env_name}.yaml"
    source = path.as_posix()
    if not path.is_file():
        known = ", ".join(available_envs(config_dir)) or "none"
        raise ConfigError(source, "env", f"no such file for env {env_name!r}; known environments: {known}")
    config = parse_environment(read_yaml(path), source, config_dir)
    object.__setattr__(config, "env_name", env_name)
    check_trained_model(config)
    if not served:
        return config
    check_rehearsal(config, lambda other: load_config(other, config_dir, served=False))
    return served_from_lock(config, config_dir)


def parse_environment(
    raw: Any,
    source: str,
    config_dir: str | Path,
    catalog: Mapping[str, BaseModel] | None = None,
    *,
    check_access: bool = True,
) -> AppConfig:
    """config/<env>.yaml's value as the typed config, with its training base's record from config_dir/models/
    (`catalog`: those records, read once by a caller that checks many values, e.g. make profile's search;
    `check_access` False: whether the job may download a gated base is left to the caller, as a profile's search
    does, since no serving profile changes it)."""
    raw = {} if raw is None else raw
    catalog = read_catalog(config_dir) if catalog is None else catalog
    base = training_base(raw.get("training") if isinstance(raw, Mapping) else None, catalog)
    config = parse(AppConfig, with_base_facts(raw, source, base), source=source)
    object.__setattr__(config, "source", source)
    object.__setattr__(config, "base_model", base.model)
    if check_access:
        check_gated_access(base, config.training, source)
    return config


def served_from_lock(config: AppConfig, config_dir: Path) -> AppConfig:
    """The environment serving config/<env>.model.json's version, when the promotion wrote one."""
    path = lock_path(config_dir, config.env_name)
    if not path.is_file():
        return config
    return with_model(config, read_lock(path), path.as_posix())


def load_chain(config_dir: str | Path = "config") -> list[list[Stage]]:
    """Load and validate every config/*.yaml, then their chain."""
    return deploy_chain({name: load_config(name, config_dir) for name in available_envs(Path(config_dir))})


def deployed_environments(config_dir: str | Path = "config") -> list[str]:
    """The environments deploy.yml deploys, in chain order (wave, then name)."""
    return [stage.name for wave in load_chain(config_dir) for stage in wave]
