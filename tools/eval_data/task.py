"""A task's definition as lm-eval indexes it (its packaged YAMLs, or --include-path's), read without the hub.

Indexing all of lm-eval's ~15,000 task YAMLs takes 10-14 s here; only the folders whose YAMLs name the task (a
text scan, under a second) are indexed, which resolves the same includes and finds the same entry."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from tools.eval_data.model import CONTRACT, FunctionRef, Refused, TaskDefinition


def _function_refs(value: Any) -> Any:
    """lm-eval's unresolved `!function` values (<yaml folder>/<module>.<name>) as FunctionRef, recursively."""
    if isinstance(value, dict):
        return {key: _function_refs(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_function_refs(item) for item in value]
    if isinstance(value, str) and "/" in value:
        head, _, name = value.rpartition(".")
        module = Path(head + ".py")
        if name and module.is_file():
            return FunctionRef(f"{module.stem}.{name}", module)
    return value


def _folders_naming(name: str, roots: list[Path]) -> list[str]:
    """Every folder under `roots` with a YAML in which `name` appears as a whole word."""
    word = re.compile(rb"(?<![\w.-])" + re.escape(name.encode()) + rb"(?![\w.-])")
    found = {path.parent for root in roots for path in root.rglob("*.yaml") if word.search(path.read_bytes())}
    return [str(folder) for folder in sorted(found)]


def find_task(name: str, include_path: str | None = None) -> TaskDefinition:
    """The task `name`; Refused for an unknown name, a group or tag, a Python task or one already on files."""
    import lm_eval.tasks
    from lm_eval.tasks import TaskManager
    from lm_eval.tasks._index import Kind
    from lm_eval.tasks._yaml_loader import load_yaml

    roots = [Path(lm_eval.tasks.__file__).parent, *([Path(include_path)] if include_path else [])]
    folders = _folders_naming(name, roots)
    entry = TaskManager(include_path=folders, include_defaults=False).task_index.get(name) if folders else None
    if entry is None:
        raise Refused(f"{name}: no such lm-eval task (nor in --include-path); `lm-eval ls tasks` lists them")
    if entry.kind in (Kind.GROUP, Kind.TAG):
        raise Refused(f"{name}: an lm-eval {entry.kind.name.lower()} of several tasks; stage each task by its name")
    if entry.kind is not Kind.TASK or entry.yaml_path is None:
        raise Refused(f"{name}: a Python task class; only tasks defined in YAML can be staged")
    config = _function_refs(load_yaml(entry.yaml_path, resolve_func=False))
    if "class" in config:
        raise Refused(f"{name}: a Python task class; only tasks defined in YAML can be staged")
    task = TaskDefinition(name=name, yaml_path=Path(entry.yaml_path), config=config)
    if task.config.get("dataset_path") in CONTRACT.LOCAL_BUILDERS:
        raise Refused(f"{name}: reads local files already (dataset_path {task.dataset}); copy its folder instead")
    if not task.config.get("dataset_path") or not task.splits:
        raise Refused(f"{name}: its definition names no hub dataset and split to stage")
    return task
