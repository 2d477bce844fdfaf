"""Find, read and validate `config/<env>.yaml`; every failure is one ConfigError line."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml

from .app_config import AppConfig
from .deploy import ENV_NAME_PATTERN, Stage, deploy_chain
from .errors import ConfigError
from .model_lock import lock_path, read_lock
from .rehearsal import check_rehearsal
from .schema import describe, parse
from .served_model import with_model
from .trained_model import check_trained_model


class _StrictLoader(yaml.SafeLoader):
    """SafeLoader that rejects duplicate keys, which PyYAML would otherwise silently overwrite."""


def _construct_mapping(loader: _StrictLoader, node: yaml.MappingNode, deep: bool = False) -> dict:
    seen: dict[Any, Any] = {}
    for key_node, value_node in node.value:
        key = loader.construct_object(key_node, deep=deep)
        if key in seen:
            mark = key_node.start_mark
            raise yaml.constructor.ConstructorError(None, None, f"duplicate key {key!r}", mark)
        seen[key] = loader.construct_object(value_node, deep=deep)
    return seen


_StrictLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)


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
    try:
        raw = yaml.load(path.read_text(encoding="utf-8"), Loader=_StrictLoader)  # noqa: S506 - strict safe loader
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f"line {mark.line + 1}" if mark else "<yaml>"
        problem = getattr(err, "problem", None) or str(err).splitlines()[0]
        raise ConfigError(source, where, f"invalid YAML: {problem}") from None
    except UnicodeDecodeError:
        raise ConfigError(source, "<file>", "not UTF-8 text") from None
    config = parse(AppConfig, {} if raw is None else raw, source=source)
    object.__setattr__(config, "env_name", env_name)
    object.__setattr__(config, "source", source)
    check_trained_model(config)
    if not served:
        return config
    check_rehearsal(config, lambda other: load_config(other, config_dir, served=False))
    return served_from_lock(config, config_dir)


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
