"""The one way stacks and config load a module of training_code/: from its file, under a private name."""

from __future__ import annotations

import importlib.util
import sys
from functools import cache
from pathlib import Path
from types import ModuleType


@cache
def load_code_module(folder: Path, file_name: str) -> ModuleType:
    """`folder/file_name` as a module named `_code_contract_<folder>_<stem>` (stdlib-only modules: it is not on
    sys.path, so it cannot import its siblings)."""
    path = Path(folder) / file_name
    spec = importlib.util.spec_from_file_location(f"_code_contract_{path.parent.name}_{path.stem}", path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while the file executes
    spec.loader.exec_module(module)
    return module
