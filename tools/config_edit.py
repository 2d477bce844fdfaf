"""Set or remove dotted settings in a config/<env>.yaml, changing only their lines: comments, key order, quoting
and line wrapping everywhere else stay byte for byte, so the change is one small reviewed diff.

    python tools/config_edit.py config/prod.yaml training.base_model_key=base-models/x/ [--remove KEY ...]

ruamel.yaml's round-trip parser says where each key and value is (a dump would re-wrap long plain scalars and
rewrite `null`); the edit is made on those lines, and the result is parsed again and must equal the old settings
with exactly the requested changes, or nothing is written. Values are scalars (string, number, true/false, null);
a missing mapping on the path is added at the end of its parent, a new key at the end of its mapping.
"""

from __future__ import annotations

import argparse
import copy
import re
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import yaml

Scalar = str | int | float | bool | None
_VALUE_END = re.compile(r"(.*?)(\s+#.*)?$")


class EditError(ValueError):
    """The edit cannot be made as a line edit (a flow-style or missing parent); nothing was written."""


def _parse(text: str) -> Any:
    from ruamel.yaml import YAML

    return YAML(typ="rt").load(text)


def render(value: Scalar) -> str:
    """One YAML scalar as it reads back to `value`."""
    if isinstance(value, dict | list):
        raise EditError(f"{value!r}: only scalar values are set")
    return yaml.safe_dump(value, default_flow_style=True, width=10**6).removesuffix("\n").removesuffix("\n...")


def _block_end(lines: list[str], start: int, column: int) -> int:
    """The index after the last content line of the block that starts on line `start` at `column`."""
    end = start + 1
    for index in range(start + 1, len(lines)):
        stripped = lines[index].strip()
        if not stripped or stripped.startswith("#"):
            continue
        if len(lines[index]) - len(lines[index].lstrip(" ")) <= column:
            break
        end = index + 1
    return end


def _walk(document: Any, parts: list[str]) -> tuple[Any, int]:
    """The deepest mapping on the path and how many of the parts lead to it."""
    node, depth = document, 0
    for part in parts[:-1]:
        child = node.get(part) if hasattr(node, "get") else None
        if not hasattr(child, "lc") or not hasattr(child, "get"):
            break
        node, depth = child, depth + 1
    return node, depth


def _child_column(mapping: Any) -> int:
    if not mapping or mapping.fa.flow_style():
        raise EditError("the mapping is empty or in flow style {...}; edit it by hand")
    return mapping.lc.key(next(iter(mapping)))[1]


def _set_text(text: str, dotted: str, value: Scalar) -> str:
    lines = text.splitlines(keepends=True)
    parts = dotted.split(".")
    mapping, depth = _walk(_parse(text), parts)
    column = _child_column(mapping)
    if depth == len(parts) - 1 and parts[-1] in mapping:
        if hasattr(mapping[parts[-1]], "lc"):
            raise EditError(f"{dotted}: holds a mapping or list; only a scalar is replaced")
        line, start = mapping.lc.value(parts[-1])
        found = _VALUE_END.match(lines[line][start:].rstrip("\n"))
        ending = "\n" if lines[line].endswith("\n") else ""
        lines[line] = lines[line][:start] + render(value) + (found.group(2) or "") + ending
        return "".join(lines)
    new = []
    for offset, part in enumerate(parts[depth:]):
        tail = f" {render(value)}" if depth + offset == len(parts) - 1 else ""
        new.append(" " * (column + 2 * offset) + f"{part}:{tail}\n")
    last = list(mapping)[-1]
    line, key_column = mapping.lc.key(last)
    at = _block_end(lines, line, key_column)
    if at > 0 and not lines[at - 1].endswith("\n"):
        lines[at - 1] += "\n"
    return "".join(lines[:at] + new + lines[at:])


def _remove_text(text: str, dotted: str) -> str:
    parts = dotted.split(".")
    mapping, depth = _walk(_parse(text), parts)
    if depth != len(parts) - 1 or parts[-1] not in mapping:
        return text
    if len(mapping) == 1:
        raise EditError(f"{dotted}: the only key of its mapping; remove the mapping instead")
    lines = text.splitlines(keepends=True)
    line, column = mapping.lc.key(parts[-1])
    return "".join(lines[:line] + lines[_block_end(lines, line, column) :])


def _says(data: Any, dotted: str, value: Scalar) -> bool:
    node = data
    for part in dotted.split("."):
        if not isinstance(node, dict) or part not in node:
            return False
        node = node[part]
    return type(node) is type(value) and node == value


def _expected(data: Any, values: Mapping[str, Scalar], removed: Iterable[str]) -> Any:
    expected = copy.deepcopy(data)
    for dotted, value in values.items():
        node = expected
        *parents, key = dotted.split(".")
        for part in parents:
            node = node.setdefault(part, {})
        node[key] = value
    for dotted in removed:
        node = expected
        *parents, key = dotted.split(".")
        for part in parents:
            node = node.get(part) or {}
        node.pop(key, None)
    return expected


def edit(path: Path, values: Mapping[str, Scalar] | None = None, removed: Iterable[str] = ()) -> bool:
    """Set `values` ({dotted key: scalar}) and remove the `removed` dotted keys in the YAML file `path`; False when
    the file already says so. EditError (nothing written) when the result would differ in anything else."""
    values, removed = dict(values or {}), list(removed)
    before = path.read_text(encoding="utf-8")
    current = yaml.safe_load(before)
    text = before
    for dotted, value in values.items():
        if not _says(current, dotted, value):  # a value already there keeps its quoting and wrapping
            text = _set_text(text, dotted, value)
    for dotted in removed:
        text = _remove_text(text, dotted)
    if yaml.safe_load(text) != _expected(yaml.safe_load(before), values, removed):
        raise EditError(f"{path}: the line edit would change more than {', '.join([*values, *removed])}; edit by hand")
    if text == before:
        return False
    path.write_text(text, encoding="utf-8")
    return True


def _value(text: str) -> Scalar:
    return yaml.safe_load(text) if text else ""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python tools/config_edit.py", description=__doc__.split("\n\n")[0])
    parser.add_argument("file", type=Path, help="the YAML file, e.g. config/prod.yaml")
    parser.add_argument("settings", nargs="*", metavar="KEY=VALUE", help="dotted key = YAML scalar")
    parser.add_argument("--remove", action="append", default=[], metavar="KEY", help="a dotted key to remove")
    args = parser.parse_args(argv)
    values = {key: _value(value) for key, _, value in (item.partition("=") for item in args.settings)}
    try:
        changed = edit(args.file, values, args.remove)
    except (EditError, OSError, yaml.YAMLError) as err:
        print(f"config_edit: {' '.join(str(err).split())}", file=sys.stderr)
        return 2
    print(f"{args.file}: {'changed' if changed else 'unchanged'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
