"""Which checkpoint to resume from, and saving one when SageMaker stops the job (spot interruption, StopTrainingJob).

A spot interruption can land in the middle of a save, leaving the newest `checkpoint-N` half written; resuming
from it crashes the restarted job. The Trainer writes trainer_state.json last, so a checkpoint counts as
complete when that file parses and the weights and optimizer state sit beside it.
"""

from __future__ import annotations

import json
import re
import signal
from pathlib import Path
from typing import Any

from transformers import TrainerCallback

_CHECKPOINT = re.compile(r"^checkpoint-(\d+)$")
WEIGHT_FILES = ("adapter_model.safetensors", "model.safetensors", "model.safetensors.index.json")
OPTIMIZER_FILES = ("optimizer.pt",)
SHARDED_PREFIXES = {"weights": "pytorch_model_fsdp_", "optimizer": "optimizer_"}  # FSDP sharded state dicts


def _has(folder: Path, names: tuple[str, ...], sharded_prefix: str) -> bool:
    if any((folder / name).is_file() for name in names):
        return True
    return any(path.is_dir() and path.name.startswith(sharded_prefix) for path in folder.iterdir())


def incomplete_reason(folder: Path) -> str | None:
    """Why a checkpoint folder cannot be resumed from, or None when it can."""
    state = folder / "trainer_state.json"
    try:
        json.loads(state.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return "trainer_state.json missing or unreadable"
    if not _has(folder, WEIGHT_FILES, SHARDED_PREFIXES["weights"]):
        return "no adapter or model weights"
    if not _has(folder, OPTIMIZER_FILES, SHARDED_PREFIXES["optimizer"]):
        return "no optimizer state"
    return None


def checkpoints_newest_first(checkpoint_dir: str | Path) -> list[Path]:
    folder = Path(checkpoint_dir)
    if not folder.is_dir():
        return []
    found = [(int(m.group(1)), path) for path in folder.iterdir() if (m := _CHECKPOINT.match(path.name))]
    return [path for _, path in sorted(found, reverse=True) if path.is_dir()]


def newest_complete_checkpoint(checkpoint_dir: str | Path) -> tuple[str | None, list[dict[str, str]]]:
    """The newest resumable checkpoint, and the newer ones skipped (with why) to report."""
    skipped = []
    for path in checkpoints_newest_first(checkpoint_dir):
        reason = incomplete_reason(path)
        if reason is None:
            return str(path), skipped
        skipped.append({"checkpoint": str(path), "reason": reason})
    return None, skipped


class StopSignal:
    """Remembers a SIGTERM instead of dying at once, so that the training loop can save first."""

    def __init__(self) -> None:
        self.received = False
        self._previous: Any = None

    def install(self) -> StopSignal:
        self._previous = signal.signal(signal.SIGTERM, self._handle)
        return self

    def uninstall(self) -> None:
        if self._previous is not None:
            signal.signal(signal.SIGTERM, self._previous)
            self._previous = None

    def _handle(self, signum, frame) -> None:
        self.received = True
        print("SIGTERM received: saving a checkpoint after this step, then stopping", flush=True)


def _agreed(flag: bool) -> bool:
    """True on every rank when any rank got the signal: saving is collective under DDP/FSDP."""
    import torch
    import torch.distributed as dist

    if not (dist.is_available() and dist.is_initialized()):
        return flag
    device = torch.device("cuda", torch.cuda.current_device()) if torch.cuda.is_available() else None
    value = torch.tensor([int(flag)], device=device)
    dist.all_reduce(value, op=dist.ReduceOp.MAX)
    return bool(value.item())


class SaveOnSigterm(TrainerCallback):
    """After the step in which SIGTERM arrived: save a checkpoint and stop training."""

    def __init__(self, stop: StopSignal) -> None:
        self.stop = stop
        self.saved_at_step: int | None = None

    def on_step_end(self, args, state, control, **kwargs):
        if _agreed(self.stop.received):
            control.should_save = True
            control.should_training_stop = True
            self.saved_at_step = state.global_step
        return control
