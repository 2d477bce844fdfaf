"""A small typed-dataclass validator: one place turns raw YAML into frozen config objects.

Every section is a frozen dataclass whose fields carry their limits in `setting(...)`. `parse`
walks the type hints, so a new setting needs one line and gets type, range and unknown-key checks
with the same one-line error format for free.
"""

from __future__ import annotations

import dataclasses
import difflib
import re
import types
import typing
from collections.abc import Mapping
from typing import Any, Literal, TypeVar

from .errors import ConfigError

T = TypeVar("T")
_MISSING = dataclasses.MISSING


def setting(
    default: Any = _MISSING,
    *,
    ge: float | None = None,
    le: float | None = None,
    pattern: str | None = None,
    key_pattern: str | None = None,
    hint: str = "",
) -> Any:
    """Declare a config field with its allowed range; mutable defaults are copied per instance.

    `pattern` applies to string values (also the values of a mapping), `key_pattern` to mapping keys."""
    metadata = {"ge": ge, "le": le, "pattern": pattern, "key_pattern": key_pattern, "hint": hint}
    if isinstance(default, dict | list):
        frozen = default
        return dataclasses.field(default_factory=lambda: type(frozen)(frozen), metadata=metadata)
    return dataclasses.field(default=default, metadata=metadata)


def describe(value: Any) -> str:
    """Render a bad value compactly for the one-line error."""
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def parse(cls: type[T], data: Any, *, source: str, path: str = "") -> T:
    """Build dataclass `cls` from `data`, raising ConfigError naming `source` and the field path."""
    if not isinstance(data, Mapping):
        raise ConfigError(source, path or "<top level>", f"got {describe(data)}; expected a mapping of settings")
    hints = typing.get_type_hints(cls)
    fields = {f.name: f for f in dataclasses.fields(cls) if f.init}
    for key in data:
        if key not in fields:
            close = difflib.get_close_matches(str(key), fields, n=1)
            suggestion = f"did you mean '{close[0]}'? " if close else ""
            raise ConfigError(
                source,
                _join(path, str(key)),
                f"unknown setting; {suggestion}allowed: {', '.join(sorted(fields))}",
            )
    values = {}
    for name, field in fields.items():
        field_path = _join(path, name)
        if name in data:
            values[name] = _convert(hints[name], data[name], field, source, field_path)
        elif field.default is _MISSING and field.default_factory is _MISSING:
            raise ConfigError(source, field_path, "missing; this setting is required")
    obj = cls(**values)
    check = getattr(obj, "check", None)
    if check is not None:
        check(source, path)
    return obj


def _join(path: str, name: str) -> str:
    return f"{path}.{name}" if path else name


def _convert(tp: Any, value: Any, field: dataclasses.Field, source: str, path: str) -> Any:
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if origin in (typing.Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        inner = [a for a in args if a is not type(None)]
        if len(inner) == 1:
            return _convert(inner[0], value, field, source, path)
        raise TypeError(f"unsupported union {tp} at {path}")
    if origin is Literal:
        if value not in args:
            allowed = ", ".join(repr(a) for a in args)
            raise ConfigError(source, path, f"got {describe(value)}; allowed: {allowed}")
        return value
    if dataclasses.is_dataclass(tp):
        return parse(tp, value, source=source, path=path)
    if origin is list:
        if not isinstance(value, list):
            raise ConfigError(source, path, f"got {describe(value)}; expected a list")
        return tuple(_convert(args[0], v, field, source, f"{path}[{i}]") for i, v in enumerate(value))
    if origin is dict:
        if not isinstance(value, Mapping):
            raise ConfigError(source, path, f"got {describe(value)}; expected a mapping")
        out = {}
        for k, v in value.items():
            if not isinstance(k, str):
                raise ConfigError(source, path, f"key {describe(k)} must be a string")
            key_pattern = field.metadata.get("key_pattern")
            if key_pattern and not re.fullmatch(key_pattern, k):
                raise ConfigError(source, path, f"key {describe(k)} must match {key_pattern}")
            out[k] = _convert(args[1], v, field, source, f"{path}.{k}")
        return types.MappingProxyType(dict(sorted(out.items())))
    return _scalar(tp, value, field, source, path)


def _scalar(tp: Any, value: Any, field: dataclasses.Field, source: str, path: str) -> Any:
    meta = field.metadata
    hint = f" ({meta['hint']})" if meta.get("hint") else ""
    if tp is bool:
        if not isinstance(value, bool):
            raise ConfigError(source, path, f"got {describe(value)}; expected true or false")
        return value
    if tp is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise ConfigError(source, path, f"got {describe(value)}; expected an integer{_range(meta)}{hint}")
    elif tp is float:
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise ConfigError(source, path, f"got {describe(value)}; expected a number{_range(meta)}{hint}")
        value = float(value)
    elif tp is str:
        if not isinstance(value, str):
            raise ConfigError(source, path, f"got {describe(value)}; expected a string{hint}")
        if meta.get("pattern") and not re.fullmatch(meta["pattern"], value):
            raise ConfigError(source, path, f"got {describe(value)}; must match {meta['pattern']}{hint}")
        return value
    else:
        raise TypeError(f"unsupported config type {tp} at {path}")
    if (meta.get("ge") is not None and value < meta["ge"]) or (meta.get("le") is not None and value > meta["le"]):
        kind = "an integer" if tp is int else "a number"
        raise ConfigError(source, path, f"got {describe(value)}; expected {kind}{_range(meta)}{hint}")
    return value


def _range(meta: Mapping[str, Any]) -> str:
    ge, le = meta.get("ge"), meta.get("le")
    if ge is not None and le is not None:
        return f" in {ge}..{le}"
    if ge is not None:
        return f" >= {ge}"
    if le is not None:
        return f" <= {le}"
    return ""
