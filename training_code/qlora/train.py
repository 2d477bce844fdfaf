"""QLoRA fine-tuning entry point, the same on a laptop CPU and in a SageMaker training job.

Loads the base model in 4-bit NF4, trains a LoRA adapter on the answers (resuming from the newest complete
checkpoint; a SIGTERM saves one), merges it into a full-precision copy of the base for serving, writes a model
card, model_kind.json and model_facts.json (read back from the saved files) beside it, and
training_report.json. Under torchrun each rank trains (DDP, or FSDP with --fsdp) and rank 0 merges.
See --help; the code is the `finetune` package beside this file.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))  # the finetune package, also when loaded by file

from finetune.args import parse_args  # noqa: E402
from finetune.run import run  # noqa: E402


def main(argv: list[str] | None = None, extra_callbacks: list | None = None) -> dict[str, Any]:
    """Parse the command line (SageMaker's hyperparameters) and run; returns the report. extra_callbacks are
    Trainer callbacks, for tests."""
    return run(parse_args(argv), extra_callbacks)


if __name__ == "__main__":
    main()
