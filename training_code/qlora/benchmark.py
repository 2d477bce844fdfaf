"""Benchmark evaluation entry point, the same on a laptop CPU and in a SageMaker training job.

Runs EleutherAI's lm-evaluation-harness on the tuned (merged) model and on its base, on tasks staged as files (no
hub needed), and writes benchmark.json (per task and metric: base, tuned, the drop in points) for the quality gate.
It ships beside train.py, in the same code asset and training image. See --help; the code is finetune/benchmark/.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))  # the finetune package, also when loaded by file

from finetune.benchmark.args import parse_args  # noqa: E402
from finetune.benchmark.run import run  # noqa: E402


def main(argv: list[str] | None = None) -> dict[str, Any]:
    """Parse the command line (SageMaker's hyperparameters) and run; returns what benchmark.json holds."""
    return run(parse_args(argv))


if __name__ == "__main__":
    main()
