"""One benchmark run: check every task's staged files, then score the base and the tuned model with lm-eval's
`simple_evaluate` (the same tasks, seeds and settings), write benchmark.json (and the model card with its scores,
card.py) and print the metric lines."""

from __future__ import annotations

import gc
import json
import time
from pathlib import Path
from typing import Any

from .args import BenchmarkArguments
from .card import write_benchmark_card
from .contract import SCORES_FILE
from .scores import compare_task, metric_lines, summary
from .tasks import NotStaged, primary_metric, staged_tasks


def _device(requested: str) -> str:
    if requested != "auto":
        return requested
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


def evaluate(args: BenchmarkArguments, pretrained: str, configs: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """lm-eval's results for one model: its `hf` backend, tasks from the staged configs only."""
    from lm_eval import simple_evaluate
    from lm_eval.tasks import TaskManager

    results = simple_evaluate(
        model="hf",
        model_args={"pretrained": pretrained, "dtype": args.dtype},
        tasks=list(configs.values()),
        task_manager=TaskManager(include_path=args.tasks_dir, include_defaults=False),
        num_fewshot=args.num_fewshot,
        limit=args.limit,
        batch_size=args.batch_size,
        device=_device(args.device),
        bootstrap_iters=args.bootstrap_iters,
        log_samples=False,
    )
    gc.collect()  # the model goes before the next one loads
    return results


def _refuse(args: BenchmarkArguments, line: str) -> SystemExit:
    """The one line the run ends with, also as SageMaker's FailureReason (the toolkit keeps a failure file the
    script wrote)."""
    if args.failure_file:
        Path(args.failure_file).parent.mkdir(parents=True, exist_ok=True)
        Path(args.failure_file).write_text(line)
    return SystemExit(f"benchmark.py: error: {line}")


def run(args: BenchmarkArguments) -> dict[str, Any]:
    """Score both models; returns what benchmark.json holds. A task not staged ends the run before any load; a
    base named by its hub id is read with the hub token of the job's secret (finetune/hub_token.py), as train.py's."""
    from ..hub_token import TOKEN_VARIABLE, HubTokenError, read_hub_token

    try:
        configs = staged_tasks(args.tasks_dir, args.task_names)
        arn = read_hub_token()
    except (NotStaged, HubTokenError) as err:
        raise _refuse(args, str(err)) from None
    if arn is not None:
        print(f"hub token: read from secret {arn} into {TOKEN_VARIABLE} (not printed)", flush=True)
    started = time.monotonic()
    base = evaluate(args, args.base, configs)
    tuned = evaluate(args, args.model, configs)
    tasks = {task: compare_task(task, primary_metric(config), base, tuned) for task, config in configs.items()}
    scores = {
        "lm_eval_version": tuned.get("lm_eval_version"),
        "base": args.base,
        "tuned": args.model,
        "num_fewshot": args.num_fewshot,
        "limit": args.limit,
        **summary(tasks),
        "tasks": tasks,
        "seconds": round(time.monotonic() - started, 1),
    }
    out = Path(args.output_dir)
    out.mkdir(parents=True, exist_ok=True)
    (out / SCORES_FILE).write_text(json.dumps(scores, indent=2) + "\n")
    write_benchmark_card(out, args.model, scores)
    for line in metric_lines(tasks, scores):
        print(line, flush=True)
    return scores
