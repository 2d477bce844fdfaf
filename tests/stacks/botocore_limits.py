"""What an AWS API refuses that botocore's ParamValidator lets through: `max`, `pattern` and `enum`.

botocore's service models carry each shape's constraints in `shape.metadata` (`min`, `max`, `pattern`) and
`shape.enum`; `botocore.validate.ParamValidator` checks types, required members and minimums only, so a
request over a maximum passes every client-side check and is refused by the service (e.g. each
CreateTrainingJob `ContainerArguments` item is at most 256 characters). `limit_violations` checks all of them.

Patterns are matched against the whole value (the services validate with Java's `String.matches`, anchored at
both ends) with the `regex` module, which knows the `\\p{L}`-style classes of tag patterns. A value that is an
`Unknown` (only known at run time, e.g. from the execution input) is skipped.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from typing import Any

import botocore.session
import regex
from botocore.model import Shape


@dataclass(frozen=True)
class Unknown:
    """A value the template does not determine (e.g. `$.train_data`): not checked; `source` says where from."""

    source: str


@cache
def _service_model(service: str):
    return botocore.session.get_session().get_service_model(service)


# Java writes the characters beyond the Basic Multilingual Plane as a range of UTF-16 surrogate pairs (CloudWatch's
# AlarmDescription pattern); Python's regex takes the code points themselves.
_SURROGATE_RANGE = (r"\uD800\uDC00-\uDBFF\uDFFF", r"\U00010000-\U0010FFFF")


@cache
def _compiled(pattern: str) -> regex.Pattern:
    return regex.compile(pattern.replace(*_SURROGATE_RANGE))


def input_shape(service: str, operation: str) -> Shape:
    """The request shape of `operation` (e.g. 'CreateTrainingJob') of `service` (e.g. 'sagemaker')."""
    return _service_model(service).operation_model(operation).input_shape


def limit_violations(service: str, operation: str, params: Mapping[str, Any]) -> list[str]:
    """One line per constraint `params` breaks, each naming the field path, e.g.
    `AlgorithmSpecification.ContainerArguments[0]: 333 characters, max 256 (TrainingContainerArgument)`."""
    found: list[str] = []
    _check(input_shape(service, operation), params, operation, found)
    return found


def _check(shape: Shape, value: Any, path: str, found: list[str]) -> None:
    if isinstance(value, Unknown):
        return
    checker = {
        "structure": _structure,
        "list": _list,
        "map": _map,
        "string": _string,
        "integer": _number,
        "long": _number,
        "float": _number,
        "double": _number,
        "boolean": _boolean,
    }.get(shape.type_name)
    if checker is not None:
        checker(shape, value, path, found)


def _structure(shape: Shape, value: Any, path: str, found: list[str]) -> None:
    if not isinstance(value, Mapping):
        found.append(f"{path}: expected an object ({shape.name}), got {type(value).__name__}")
        return
    for name in shape.required_members:
        if name not in value:
            found.append(f"{path}.{name}: required ({shape.name})")
    for name, member in value.items():
        if name not in shape.members:
            found.append(f"{path}.{name}: not a member of {shape.name}")
            continue
        _check(shape.members[name], member, f"{path}.{name}", found)


def _size(shape: Shape, size: int | float, unit: str, path: str, found: list[str]) -> None:
    """`size` (a length in `unit`, or with unit "" a number's value) against the shape's min and max."""
    low, high = shape.metadata.get("min"), shape.metadata.get("max")
    measured = f"{size} {unit}" if unit else f"{size}"
    if high is not None and size > high:
        found.append(f"{path}: {measured}, max {high} ({shape.name})")
    if low is not None and size < low:
        found.append(f"{path}: {measured}, min {low} ({shape.name})")


def _list(shape: Shape, value: Any, path: str, found: list[str]) -> None:
    if not isinstance(value, list):
        found.append(f"{path}: expected a list ({shape.name}), got {type(value).__name__}")
        return
    _size(shape, len(value), "items", path, found)
    for index, item in enumerate(value):
        _check(shape.member, item, f"{path}[{index}]", found)


def _map(shape: Shape, value: Any, path: str, found: list[str]) -> None:
    if not isinstance(value, Mapping):
        found.append(f"{path}: expected a map ({shape.name}), got {type(value).__name__}")
        return
    _size(shape, len(value), "entries", path, found)
    for key, item in value.items():
        _check(shape.key, key, f"{path} key {key!r}", found)
        _check(shape.value, item, f"{path}[{key!r}]", found)


def _string(shape: Shape, value: Any, path: str, found: list[str]) -> None:
    if not isinstance(value, str):
        found.append(f"{path}: expected a string ({shape.name}), got {type(value).__name__}")
        return
    _size(shape, len(value), "characters", path, found)
    if shape.enum and value not in shape.enum:
        found.append(f"{path}: {value!r} is not one of {shape.name}'s {len(shape.enum)} values")
    pattern = shape.metadata.get("pattern")
    if pattern is not None and not _compiled(pattern).fullmatch(value):
        found.append(f"{path}: {value!r} does not match {shape.name}'s pattern {pattern}")


def _number(shape: Shape, value: Any, path: str, found: list[str]) -> None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        found.append(f"{path}: expected a number ({shape.name}), got {type(value).__name__}")
        return
    _size(shape, value, "", path, found)


def _boolean(shape: Shape, value: Any, path: str, found: list[str]) -> None:
    if not isinstance(value, bool):
        found.append(f"{path}: expected a boolean ({shape.name}), got {type(value).__name__}")
