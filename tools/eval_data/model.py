"""The tool's vocabulary: a refusal, the benchmark job's staging contract, and a task as lm-eval defines it."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from stacks.code_contract.loader import load_code_module
from stacks.paths import QLORA_CODE

# The benchmark job's own names (standard library only): the staged layout the job checks before it runs.
CONTRACT = load_code_module(QLORA_CODE, "finetune/benchmark/contract.py")
SPLIT_KEYS = ("training_split", "validation_split", "test_split", "fewshot_split")


class Refused(Exception):
    """Nothing can be staged; the message is the one line that says why and what to do."""


@dataclass(frozen=True)
class TaskDefinition:
    """A task's merged config (includes resolved; `!function` values as FunctionRef) and its YAML file."""

    name: str
    yaml_path: Path
    config: dict[str, Any]

    @property
    def dataset(self) -> str:
        return self.config["dataset_path"]

    @property
    def dataset_name(self) -> str | None:
        return self.config.get("dataset_name")

    @property
    def splits(self) -> list[str]:
        """Every split the task reads (evaluation and few-shot), once each, in the task's order."""
        named = [self.config.get(key) for key in SPLIT_KEYS]
        return list(dict.fromkeys(split for split in named if split))


class FunctionRef(str):
    """A `!function module.name` value of a task YAML, kept as written; `module` is the file it comes from."""

    module: Path

    def __new__(cls, spec: str, module: Path) -> FunctionRef:
        ref = super().__new__(cls, spec)
        ref.module = module
        return ref
