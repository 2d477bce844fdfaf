"""Staged tasks: each requested task's YAML and data files, checked before any model is loaded.

A job in an isolated network reaches no hub, so a task is run only from files in the `tasks` channel:
`<task>/<task>.yaml` in lm-eval's task format with `dataset_path` a local-file builder (json, csv, parquet, ...) and
`dataset_kwargs.data_files` naming files beside the YAML (make eval-data writes them so). The names are resolved
against the YAML's folder here, wherever SageMaker mounts the channel; lm-eval gets the config as a dict.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .contract import LOCAL_BUILDERS, STAGE_COMMAND, STAGED_PREFIX


class NotStaged(ValueError):
    """A task the job cannot run offline; the message is the one line the run ends with."""


def _refuse(task: str, problem: str) -> NotStaged:
    how = STAGE_COMMAND.format(task=task)
    return NotStaged(
        f"benchmark task {task!r}: {problem}; stage it with `{how}` (s3://<bucket>/{STAGED_PREFIX}{task}/, the "
        "`tasks` channel) or, for a local run, copy such a folder into --tasks_dir"
    )


def _data_files(value: Any) -> dict[str, list[str]]:
    """datasets' data_files in any of its forms (a name, a list, {split: name or list}) as {split: [names]}."""
    if isinstance(value, str | list):
        value = {"train": value}
    if not isinstance(value, dict):
        return {}
    return {split: [names] if isinstance(names, str) else list(names) for split, names in value.items()}


def staged_task(tasks_dir: str | None, task: str) -> dict[str, Any]:
    """The task's lm-eval config with its data files as absolute paths; NotStaged names what is missing."""
    from lm_eval.tasks._yaml_loader import load_yaml

    expected = f"{tasks_dir or '<tasks_dir>'}/{task}/{task}.yaml"
    yaml_path = Path(expected)
    if tasks_dir is None or not yaml_path.is_file():
        raise _refuse(task, f"not staged: no {expected} (with the data files it names)")
    config = load_yaml(yaml_path, resolve_func=True)
    if config.get("task") != task:
        raise _refuse(task, f"{yaml_path} defines task {config.get('task')!r}, not {task!r}")
    builder = config.get("dataset_path")
    if builder not in LOCAL_BUILDERS:
        raise _refuse(task, f"{yaml_path} reads dataset {builder!r} from the hub, which the job may not reach")
    kwargs = dict(config.get("dataset_kwargs") or {})
    files = _data_files(kwargs.get("data_files"))
    if not files:
        raise _refuse(task, f"{yaml_path} names no dataset_kwargs.data_files")
    resolved = {split: [str(yaml_path.parent / name) for name in names] for split, names in files.items()}
    missing = [path for paths in resolved.values() for path in paths if not Path(path).is_file()]
    if missing:
        raise _refuse(task, f"not staged: {', '.join(missing)} missing (named by {yaml_path.name})")
    return {**config, "dataset_kwargs": {**kwargs, "data_files": resolved}}


def staged_tasks(tasks_dir: str | None, tasks: list[str]) -> dict[str, dict[str, Any]]:
    """Every requested task's config; the first one not staged ends the run (NotStaged)."""
    return {task: staged_task(tasks_dir, task) for task in tasks}


def primary_metric(config: dict[str, Any]) -> str:
    """The task's first listed metric (its headline score: acc for multiple choice), which the gate compares."""
    metrics = config.get("metric_list") or []
    return metrics[0]["metric"] if metrics else "acc"
