"""Reading one YAML file of config/ strictly: duplicate keys and bad syntax fail as one ConfigError line."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from .errors import ConfigError


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


def read_yaml(path: Path) -> Any:
    """The file's value (None when empty); invalid YAML or text names its line in one ConfigError."""
    source = path.as_posix()
    try:
        return yaml.load(path.read_text(encoding="utf-8"), Loader=_StrictLoader)  # noqa: S506 - strict safe loader
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f"line {mark.line + 1}" if mark else "<yaml>"
        problem = getattr(err, "problem", None) or str(err).splitlines()[0]
        raise ConfigError(source, where, f"invalid YAML: {problem}") from None
    except UnicodeDecodeError:
        raise ConfigError(source, "<file>", "not UTF-8 text") from None
