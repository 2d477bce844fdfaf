"""What the benchmark job reads and writes, for the stack that starts it (standard library only: the CDK stacks
load this file alone at synth time, where torch and lm_eval are absent).

Channels: `model` (the merged model), `base` (its base; or --base naming a hub id where the job is online),
`tasks` (the staged tasks: one folder per task, `<task>/<task>.yaml` and the files it names, as make eval-data
writes them under the bucket's `eval-data/`). The scores go to SM_MODEL_DIR/benchmark.json, uploaded with the
job's model output; each compared metric is also printed as metric lines (METRIC_DEFINITIONS below).
"""

from __future__ import annotations

import re

PROGRAM = "benchmark.py"
MODEL_CHANNEL, BASE_CHANNEL, TASKS_CHANNEL = "model", "base", "tasks"
SCORES_FILE = "benchmark.json"
STAGED_PREFIX = "eval-data/"  # the bucket's folder of staged tasks: eval-data/<task>/
STAGE_COMMAND = "make eval-data TASK={task} ENV=<env>"
# datasets' packaged builders that read local files (datasets.packaged_modules); any other dataset_path is a hub id.
LOCAL_BUILDERS = frozenset({"json", "csv", "parquet", "arrow", "text"})
MAX_DROP = "benchmark_max_drop_points"  # the quality gate's input: the largest drop of any task's primary metric
_NUMBER = r"(-?[0-9.eE+-]+|nan)"
SIDES = ("base", "tuned", "drop_points")


def metric_key(task: str, metric: str, side: str) -> str:
    """The key of one compared value on stdout: benchmark_<task>_<metric>_<base|tuned|drop_points>."""
    return f"benchmark_{task}_{metric}_{side}"


def metric_definitions(primary: dict[str, str]) -> list[dict[str, str]]:
    """SageMaker MetricDefinitions for {task: its primary metric}: base, tuned and drop of each, and the max drop
    (3 per task + 1, within a job's 40). Each key is matched only at a line start or after a space, so no key is
    read as another that ends with it."""
    keys = [metric_key(task, metric, side) for task, metric in primary.items() for side in SIDES]
    return [{"Name": key, "Regex": rf"(?:^| ){re.escape(key)}={_NUMBER}"} for key in [*keys, MAX_DROP]]
