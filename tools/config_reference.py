#!/usr/bin/env python3
"""The settings reference of docs/configuration.md, rendered from the schema (stacks/config).

    python tools/config_reference.py           # print the table
    python tools/config_reference.py --write   # replace the table in docs/configuration.md

One row per setting of every section: its default, what it allows (range, choices, pattern), the AWS request field
it is sent as and the hint. tests/stacks/config/test_config_reference.py fails when the committed table is not
what the schema says, so a changed default, limit or field shows up in the docs of the same change.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import types
import typing
from pathlib import Path
from typing import Any, Literal

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from stacks.config.app_config import AppConfig  # noqa: E402
from stacks.config.schema import bounds  # noqa: E402

DOC = ROOT / "docs" / "configuration.md"
BEGIN = "<!-- settings reference: tools/config_reference.py --write -->"
END = "<!-- end of settings reference -->"


def _inner(tp: Any) -> Any:
    if typing.get_origin(tp) in (typing.Union, types.UnionType):
        return next(a for a in typing.get_args(tp) if a is not type(None))
    return tp


def sections() -> dict[type, str]:
    """Each section class reachable from AppConfig, with the first path it is found at ('' for the root)."""
    found: dict[type, str] = {}

    def walk(cls: type, path: str) -> None:
        if cls in found:
            return
        found[cls] = path
        hints = typing.get_type_hints(cls)
        for f in dataclasses.fields(cls):
            tp = _inner(hints[f.name])
            if dataclasses.is_dataclass(tp):
                walk(tp, f"{path}.{f.name}" if path else f.name)

    walk(AppConfig, "")
    return found


def _default(f: dataclasses.Field, tp: Any) -> str:
    if f.default is not dataclasses.MISSING:
        value = f.default
    elif f.default_factory is not dataclasses.MISSING:
        value = f.default_factory()
    else:
        return "required"
    if dataclasses.is_dataclass(value):
        changed = (
            [
                f"{g.name}: {getattr(value, g.name)!r}"
                for g in dataclasses.fields(value)
                if g.init and getattr(value, g.name) != getattr(type(value)(), g.name, None)
            ]
            if _constructible(type(value))
            else []
        )
        return ", ".join(changed) if changed else "its defaults"
    if isinstance(value, dict):
        return ", ".join(f"{k}: {v}" for k, v in value.items()) or "{}"
    if isinstance(value, list | tuple):
        return ", ".join(map(str, value)) or "[]"
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _constructible(cls: type) -> bool:
    return all(
        f.default is not dataclasses.MISSING or f.default_factory is not dataclasses.MISSING
        for f in dataclasses.fields(cls)
        if f.init
    )


def _range(ge: Any, le: Any) -> str:
    return f"{'' if ge is None else ge}..{'' if le is None else le}" if ge is not None or le is not None else ""


def _allowed(f: dataclasses.Field, tp: Any) -> str:
    meta = f.metadata
    if typing.get_origin(tp) is Literal:
        return ", ".join(str(a) for a in typing.get_args(tp))
    if tp in (int, float):
        return _range(*bounds(meta))
    parts = []
    if meta.get("key_pattern"):
        parts.append(f"keys `{meta['key_pattern']}`")
    if meta.get("pattern"):
        parts.append(f"`{meta['pattern']}`")
    return ", ".join(parts)


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def rows() -> list[list[str]]:
    found = []
    for cls, path in sections().items():
        hints = typing.get_type_hints(cls)
        for f in dataclasses.fields(cls):
            if not f.init:
                continue
            tp = _inner(hints[f.name])
            aws = f.metadata.get("aws")
            found.append(
                [
                    f"{path}.{f.name}" if path else f.name,
                    _default(f, tp),
                    _allowed(f, tp),
                    aws.note().strip()[1:-1] if aws is not None else "",
                    f.metadata.get("hint", ""),
                ]
            )
    return found


def documented() -> list[str]:
    """One line per limit AWS documents but botocore's model does not encode, with where AWS says it."""
    from stacks.config import aws_limits

    found = []
    for field in vars(aws_limits).values():
        if isinstance(field, aws_limits.AwsField) and field.citation:
            low, high = field.documented_min, field.documented_max
            limit = f"at least {low}" if high is None else f"at most {high}" if low is None else f"{low}..{high}"
            found.append(f"- {field.label}: {field.rule or limit} ({field.citation})")
    return found


def render() -> str:
    lines = [
        "| Setting | Default | Allowed | AWS field (botocore's range) | Note |",
        "| --- | --- | --- | --- | --- |",
    ]
    lines += ["| " + " | ".join(_cell(c) for c in row) + " |" for row in rows()]
    lines += ["", "Limits AWS documents that botocore's model does not encode:", "", *documented()]
    return "\n".join(lines) + "\n"


def replaced(text: str) -> str:
    """`text` (docs/configuration.md) with the table between the markers rendered anew."""
    head, rest = text.split(BEGIN + "\n", 1)
    _, tail = rest.split(END, 1)
    return f"{head}{BEGIN}\n{render()}{END}{tail}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true", help=f"update {DOC.relative_to(ROOT)}")
    args = parser.parse_args(argv)
    if args.write:
        DOC.write_text(replaced(DOC.read_text(encoding="utf-8")), encoding="utf-8")
    else:
        sys.stdout.write(render())
    return 0


if __name__ == "__main__":
    sys.exit(main())
