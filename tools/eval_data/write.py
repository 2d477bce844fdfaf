"""The staged folder: <task>.yaml reading <split>.jsonl files beside it, the task's Python helpers copied."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import yaml

from tools.eval_data.fetch import Fetched
from tools.eval_data.model import FunctionRef, TaskDefinition

STRUCTURE_KEYS = ("tag", "group")  # the packaged task's memberships: a staged copy stands alone


class _Dumper(yaml.SafeDumper):
    pass


_Dumper.add_representer(FunctionRef, lambda dumper, ref: dumper.represent_scalar("!function", str(ref)))


def _modules(value: Any) -> set[Path]:
    if isinstance(value, FunctionRef):
        return {value.module}
    if isinstance(value, dict):
        return set().union(*map(_modules, value.values())) if value else set()
    if isinstance(value, list):
        return set().union(*map(_modules, value)) if value else set()
    return set()


def staged_config(task: TaskDefinition, fetched: Fetched) -> dict[str, Any]:
    """The task's config reading the staged files: json builder, data_files beside the YAML, provenance."""
    config = {key: value for key, value in task.config.items() if key not in STRUCTURE_KEYS}
    config.pop("dataset_name", None)
    metadata = config.get("metadata") if isinstance(config.get("metadata"), dict) else {}
    staged_from = {"dataset_path": task.dataset, "dataset_name": task.dataset_name, "revision": fetched.revision}
    return {
        **config,
        "dataset_path": "json",
        "dataset_kwargs": {"data_files": {split: f"{split}.jsonl" for split in fetched.rows}},
        "metadata": {**metadata, "staged_from": staged_from},
    }


def write_staged(task: TaskDefinition, fetched: Fetched, out: Path) -> Path:
    """out/<task>/ with the YAML, one JSON Lines file per split and the task folder's Python modules."""
    folder = out / task.name
    if folder.exists():
        shutil.rmtree(folder)
    folder.mkdir(parents=True)
    config = staged_config(task, fetched)
    for module in sorted(_modules(config)):
        for helper in sorted(module.parent.glob("*.py")):  # a helper may import its neighbours
            shutil.copy2(helper, folder / helper.name)
    for split, rows in fetched.rows.items():
        lines = [json.dumps(row, ensure_ascii=False, default=str) for row in rows]
        (folder / f"{split}.jsonl").write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    text = yaml.dump(config, Dumper=_Dumper, sort_keys=False, allow_unicode=True, width=1000)
    (folder / f"{task.name}.yaml").write_text(f"# Staged by make eval-data from {fetched.source}.\n{text}")
    return folder
