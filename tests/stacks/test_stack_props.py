"""Narrow props, read from the signatures of every function under stacks/.

stacks/application.py is the one place that reads the whole config: it hands each stack, construct and request
builder its own section and the facts it resolved. So outside application.py and the config package (which
validates the whole), no parameter is annotated AppConfig; and nowhere is a config section typed Any, so every
signature says which section it reads.
"""

from __future__ import annotations

import ast
import dataclasses
import typing
from collections.abc import Iterator
from pathlib import Path

from stacks.config.app_config import AppConfig
from stacks.serving.backends import backends
from tests.synth import ROOT

STACKS = ROOT / "stacks"
WHOLE_CONFIG_READERS = (STACKS / "application.py", STACKS / "config")
# `data` is left out: it also names every raw YAML or JSON document the parsers take, which is Any on purpose.
RAW_DOCUMENT = "data"


def _section_names() -> set[str]:
    """`config` and each name a section goes by: AppConfig's dataclass-typed fields, the backends' sections."""
    hints = typing.get_type_hints(AppConfig)
    sections = {
        f.name
        for f in dataclasses.fields(AppConfig)
        if f.init and any(dataclasses.is_dataclass(t) for t in (hints[f.name], *typing.get_args(hints[f.name])))
    }
    own = {backend.section for backend in backends().values() if backend.section}
    return ({"config"} | sections | own) - {RAW_DOCUMENT}


def _parameters(path: Path) -> Iterator[tuple[int, str, str, str]]:
    """(line, function, parameter, annotation as written) for every annotated parameter in `path`."""
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            args = node.args
            for arg in [*args.posonlyargs, *args.args, *args.kwonlyargs, args.vararg, args.kwarg]:
                if arg is not None and arg.annotation is not None:
                    yield node.lineno, node.name, arg.arg, ast.unparse(arg.annotation)


def _shown(root: Path, path: Path, line: int, function: str, name: str, annotation: str) -> str:
    return f"{path.relative_to(root.parent)}:{line} {function}({name}: {annotation})"


def whole_config_parameters(root: Path) -> list[str]:
    """Parameters annotated AppConfig outside application.py and the config package."""
    readers = [root / p.relative_to(STACKS) for p in WHOLE_CONFIG_READERS]
    found = []
    for path in sorted(root.rglob("*.py")):
        if path in readers or readers[1] in path.parents:
            continue
        for line, function, name, annotation in _parameters(path):
            if "AppConfig" in annotation:
                found.append(_shown(root, path, line, function, name, annotation))
    return found


def sections_typed_any(root: Path) -> list[str]:
    """Parameters named after a config section (or `config`) and annotated Any."""
    sections = _section_names()
    found = []
    for path in sorted(root.rglob("*.py")):
        for line, function, name, annotation in _parameters(path):
            if name in sections and annotation.strip("'\"") in ("Any", "typing.Any"):
                found.append(_shown(root, path, line, function, name, annotation))
    return found


def test_the_section_names_include_every_stack_section_and_the_backends_own():
    assert {"config", "training", "serving", "pruning", "network", "lmi", "neuron"} <= _section_names()


def test_only_the_application_and_the_config_package_take_the_whole_config():
    assert whole_config_parameters(STACKS) == []


def test_no_config_section_is_typed_any():
    assert sections_typed_any(STACKS) == []
