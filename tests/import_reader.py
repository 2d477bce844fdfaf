"""One reader of a module's import statements, for the layering and import-graph tests."""

from __future__ import annotations

import ast
from pathlib import Path


def imported_names(path: Path, root: Path) -> list[str]:
    """Every dotted name `path` imports (those inside functions too), relative imports resolved against the package
    `path` is in below `root`; `from a import b` yields a (the module) and a.b (b may be a submodule)."""
    package = list(path.relative_to(root).with_suffix("").parts[:-1])
    names = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = package[: len(package) - node.level + 1] if node.level else []
            module = ".".join([*base, *([node.module] if node.module else [])])
            names.append(module)
            if module != "__future__":
                names += [f"{module}.{alias.name}" if module else alias.name for alias in node.names]
    return [n for n in names if n and n != "__future__"]
