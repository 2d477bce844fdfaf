"""One reader of a module's import statements, for the layering and import-graph tests."""

from __future__ import annotations

import ast
from collections.abc import Iterable
from pathlib import Path


def imported_names(path: Path, root: Path) -> list[str]:
    """Every dotted name `path` imports (those inside functions too), relative imports resolved against the package
    `path` is in below `root`; `from a import b` yields a (the module) and a.b (b may be a submodule)."""
    return _names(ast.walk(ast.parse(path.read_text(encoding="utf-8"))), path, root)


def run_time_imported_names(path: Path, root: Path, *, deferred_functions: tuple[str, ...] = ()) -> list[str]:
    """What importing `path` imports: as imported_names, less the imports under `if TYPE_CHECKING:` (annotations
    only) and those inside the functions named `deferred_functions` (they import when called)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    skipped: set[int] = set()
    for node in ast.walk(tree):
        type_only = isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING"
        if type_only or (isinstance(node, ast.FunctionDef) and node.name in deferred_functions):
            skipped |= {id(inner) for statement in node.body for inner in ast.walk(statement)}
    return _names((node for node in ast.walk(tree) if id(node) not in skipped), path, root)


def _names(nodes: Iterable[ast.AST], path: Path, root: Path) -> list[str]:
    package = list(path.relative_to(root).with_suffix("").parts[:-1])
    names = []
    for node in nodes:
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = package[: len(package) - node.level + 1] if node.level else []
            module = ".".join([*base, *([node.module] if node.module else [])])
            names.append(module)
            if module != "__future__":
                names += [f"{module}.{alias.name}" if module else alias.name for alias in node.names]
    return [n for n in names if n and n != "__future__"]
