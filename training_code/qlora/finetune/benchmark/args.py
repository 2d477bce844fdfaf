"""The benchmark job's arguments: one typed dataclass, parsed by transformers' HfArgumentParser.

SageMaker passes hyperparameters as `--name value` and its paths through SM_* variables (channels as
SM_CHANNEL_<NAME>), so in a job only `--tasks` is needed and locally you pass the folders. The dataclass itself is
standard library only; the parser is imported where it parses.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, field

from .contract import BASE_CHANNEL, MODEL_CHANNEL, TASKS_CHANNEL


def _env(name: str) -> str | None:
    return os.environ.get(name) or None


def _channel(name: str) -> str | None:
    """The folder of input channel `name` when the job has one."""
    path = _env(f"SM_CHANNEL_{name.upper()}")
    return path if path and os.path.isdir(path) else None


@dataclass(frozen=True, kw_only=True)
class BenchmarkArguments:
    """What one benchmark run compares, on which tasks, and where the scores go."""

    tasks: str = field(
        default="", metadata={"help": "comma-separated lm-eval task names, each staged under --tasks_dir"}
    )
    model: str | None = field(
        default_factory=lambda: _channel(MODEL_CHANNEL),
        metadata={"help": "the tuned (merged) model's folder; default: the `model` channel"},
    )
    base: str | None = field(
        default_factory=lambda: _channel(BASE_CHANNEL) or _env("MODEL_ID"),
        metadata={
            "help": "the base model's folder or hub id (online jobs); default: the `base` channel, else MODEL_ID"
        },
    )
    tasks_dir: str | None = field(
        default_factory=lambda: _channel(TASKS_CHANNEL),
        metadata={"help": "staged tasks, <task>/<task>.yaml and its files (make eval-data); default: `tasks` channel"},
    )
    output_dir: str | None = field(
        default_factory=lambda: _env("SM_MODEL_DIR"),
        metadata={"help": "benchmark.json goes here; default: SM_MODEL_DIR (uploaded with the job's model output)"},
    )
    failure_file: str | None = field(
        default_factory=lambda: os.path.join(_env("SM_OUTPUT_DIR"), "failure") if _env("SM_OUTPUT_DIR") else None,
        metadata={"help": "a refusal's line goes here too; default: SM_OUTPUT_DIR/failure (SageMaker's FailureReason)"},
    )
    num_fewshot: int | None = field(
        default=None, metadata={"help": "examples in each prompt; default: each task's own (0 for most)"}
    )
    limit: int | None = field(default=None, metadata={"help": "score only the first N documents of each task"})
    batch_size: int = field(default=8, metadata={"help": "requests per forward pass"})
    dtype: str = field(
        default="auto",
        metadata={
            "help": "weights' dtype: auto (the saved one), float16, bfloat16, float32",
            "choices": ["auto", "float16", "bfloat16", "float32"],
        },
    )
    device: str = field(default="auto", metadata={"help": "auto: cuda when a GPU is present, else cpu"})
    bootstrap_iters: int = field(
        default=1000, metadata={"help": "lm-eval's iterations for standard errors; 0 leaves them out"}
    )

    @property
    def task_names(self) -> list[str]:
        return [name.strip() for name in self.tasks.split(",") if name.strip()]


def parse_args(argv: Sequence[str] | None = None) -> BenchmarkArguments:
    """The run's arguments; a missing input ends the run in one line before anything is loaded."""
    from transformers import HfArgumentParser

    parser = HfArgumentParser(BenchmarkArguments, description="lm-evaluation-harness on a tuned model and its base")
    (args,) = parser.parse_args_into_dataclasses(args=list(argv) if argv is not None else None)
    for flag, value, source in (
        ("--tasks", args.task_names, "a `tasks` hyperparameter"),
        ("--model", args.model, "a `model` channel"),
        ("--base", args.base, "a `base` channel"),
        ("--output_dir", args.output_dir, "SM_MODEL_DIR"),
    ):
        if not value:
            raise SystemExit(f"benchmark.py: error: {flag} is required (or {source})")
    return args
