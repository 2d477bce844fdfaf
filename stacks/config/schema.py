"""A small typed-dataclass validator: one place turns raw YAML into frozen config objects.

Every section is a frozen dataclass whose fields carry their limits in `setting(...)`. `parse`
walks the type hints, so a new setting needs one line and gets type, range and unknown-key checks
with the same one-line error format for free. A setting sent to AWS as a request field names it
(`aws=`, stacks/config/aws_limits.py): its range comes from botocore's model, and its errors name the field.
"""

from __future__ import annotations

import dataclasses
import difflib
import re
import types
import typing
from collections.abc import Mapping
from typing import Any, Literal, TypeVar

from .aws_limits import AwsField, setting_range
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
    aws: AwsField | None = None,
    key_aws: AwsField | None = None,
) -> Any:
    """Declare a config field with its allowed range; mutable defaults are copied per instance.

    `pattern` applies to string values (also the values of a mapping), `key_pattern` to mapping keys. `aws`: the
    request field the value is sent as (a list setting: the list); its limits apply where `ge`/`le` are looser,
    and a string or list is refused past its maximum length. `key_aws`: the field a mapping's keys are sent as."""
    metadata = {
        "ge": ge,
        "le": le,
        "pattern": pattern,
        "key_pattern": key_pattern,
        "hint": hint,
        "aws": aws,
        "key_aws": key_aws,
    }
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
        if all(a in _SCALARS for a in inner):
            return _one_of(inner, value, field, source, path)
        raise TypeError(f"unsupported union {tp} at {path}")
    if origin is Literal:
        if value not in args:
            allowed = ", ".join(repr(a) for a in args)
            raise ConfigError(source, path, f"got {describe(value)}; allowed: {allowed}{_note(field.metadata)}")
        return value
    if dataclasses.is_dataclass(tp):
        return parse(tp, value, source=source, path=path)
    if origin is list:
        if not isinstance(value, list):
            raise ConfigError(source, path, f"got {describe(value)}; expected a list")
        _check_length(len(value), "items", field.metadata, "list", source, path)
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
                raise ConfigError(
                    source, path, f"key {describe(k)} must match {key_pattern}{_note(field.metadata, 'key_aws')}"
                )
            out[k] = _convert(args[1], v, field, source, f"{path}.{k}")
        return types.MappingProxyType(dict(sorted(out.items())))
    return _scalar(tp, value, field, source, path)


# What a union of scalar types (e.g. the values of a pass-through mapping) accepts, as its error names them.
_SCALARS = {str: "a string", bool: "a boolean (true/false)", int: "an integer", float: "a number"}


def _one_of(types_: list[Any], value: Any, field: dataclasses.Field, source: str, path: str) -> Any:
    """A value of exactly one of `types_` (YAML's true is no integer here, nor 1 a string), checked as that type."""
    match = next((t for t in types_ if type(value) is t), None)
    if match is None:
        names = [_SCALARS[t] for t in types_]
        expected = ", ".join(names[:-1]) + " or " + names[-1]
        raise ConfigError(source, path, f"got {describe(value)}; expected {expected}")
    return _scalar(match, value, field, source, path)


def _scalar(tp: Any, value: Any, field: dataclasses.Field, source: str, path: str) -> Any:
    meta = field.metadata
    hint = f" ({meta['hint']})" if meta.get("hint") else ""
    if tp is bool:
        if not isinstance(value, bool):
            raise ConfigError(source, path, f"got {describe(value)}; expected true or false")
        return value
    if tp is str:
        if not isinstance(value, str):
            raise ConfigError(source, path, f"got {describe(value)}; expected a string{hint}{_note(meta)}")
        if meta.get("pattern") and not re.fullmatch(meta["pattern"], value):
            raise ConfigError(source, path, f"got {describe(value)}; must match {meta['pattern']}{hint}{_note(meta)}")
        _check_length(len(value), "characters", meta, "string", source, path)
        return value
    if tp not in (int, float):
        raise TypeError(f"unsupported config type {tp} at {path}")
    kind = "an integer" if tp is int else "a number"
    ge, le = bounds(meta)
    expected = f"expected {kind}{_range(ge, le)}{hint}{_note(meta)}"
    if isinstance(value, bool) or not isinstance(value, int | float) or (tp is int and not isinstance(value, int)):
        raise ConfigError(source, path, f"got {describe(value)}; {expected}")
    value = float(value) if tp is float else value
    if (ge is not None and value < ge) or (le is not None and value > le):
        raise ConfigError(source, path, f"got {describe(value)}; {expected}")
    return value


def bounds(meta: Mapping[str, Any]) -> tuple[float | None, float | None]:
    """A number setting's (ge, le): its own, narrowed to its AWS field's range (botocore, in the setting's unit)."""
    ge, le = meta.get("ge"), meta.get("le")
    aws = meta.get("aws")
    if aws is None:
        return ge, le
    low, high = setting_range(aws)
    return (
        low if ge is None else ge if low is None else max(ge, low),
        high if le is None else le if high is None else min(le, high),
    )


def _note(meta: Mapping[str, Any], key: str = "aws") -> str:
    """` (<AWS field>: <range>)` when the setting is sent as one."""
    aws = meta.get(key)
    return "" if aws is None else aws.note()


def _check_length(size: int, unit: str, meta: Mapping[str, Any], kind: str, source: str, path: str) -> None:
    """A string or list over its AWS field's maximum length (botocore's `max`) fails here, not at the API."""
    aws = meta.get("aws")
    if aws is None or aws.kind != kind:
        return
    high = setting_range(aws)[1]
    if high is not None and size > high:
        raise ConfigError(source, path, f"got {size} {unit}; at most {high}{aws.note()}")


def _range(ge: float | None, le: float | None) -> str:
    if ge is not None and le is not None:
        return f" in {ge}..{le}"
    if ge is not None:
        return f" >= {ge}"
    if le is not None:
        return f" <= {le}"
    return ""
