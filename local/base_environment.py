"""`make pipeline BASE=<folder>`: the local environment made to train and serve the user's own base model.

The same steps a person takes for a new model on AWS ([docs/your-own-model.md](../docs/your-own-model.md)), into a
copy of config/ so the repository's files stay as they are: `make base-model` reads the folder's record
(tools/base_model), the backend is the one whose container loads its architecture (the one asked for, or the
environment's own when it does, else the first that does), and `make profile ENV=local` writes the serving profile
the synth's rules accept for it, with `training.base_model_key` pointing at the folder's copy in the bucket. A
backend whose container serves only a model compiled ahead of time (vLLM Neuron) gets the environment's compile
step on; here the job runner runs its exporter's stand-in. The synth then checks the whole environment against
the record, as it would on AWS.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from stacks.config import load_config
from stacks.config.base_model_record import BaseModelRecord, record_name
from stacks.config.model_catalog import read_catalog
from stacks.serving import backends

ROOT = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class LocalBase:
    """The environment's config folder, its backend and the base's record."""

    config_dir: Path
    backend: str
    record: BaseModelRecord


def loading_backend(model_type: str, asked: str | None, configured: str) -> str:
    """The backend that serves `model_type`: the one asked for, else the configured one, else the first that
    loads it; one line (SystemExit) when none does or the asked one cannot."""
    loads = [b.name for b in backends.backends().values() if model_type in b.architectures]
    if asked is not None and asked not in loads:
        fix = f"use BACKEND={loads[0]}" if loads else "no backend loads it"
        raise SystemExit(
            f"pipeline: BACKEND={asked} loads {', '.join(backends.backend(asked).architectures)}, not the base's "
            f"model_type {model_type}: {fix}"
        )
    if not loads:
        raise SystemExit(f"pipeline: no serving backend loads model_type {model_type}; its record is not served")
    return asked or (configured if configured in loads else loads[0])


def _tool(module: str, *argv: str) -> None:
    """One of the operator tools, as `make` runs it; its own one-line refusal ends the pipeline."""
    done = subprocess.run([sys.executable, "-m", module, *argv], cwd=ROOT, check=False)
    if done.returncode != 0:
        raise SystemExit(f"pipeline: {module} refused the base (the line above says why)")


def prepare(
    base: Path | None, asked: str | None, env_name: str, work: Path, say: Callable[[str], None]
) -> LocalBase | None:
    """config/ copied under `work`, with `env_name` training `base` (its record written) and served by the backend
    that loads it; None when neither the base nor the backend changes (the shipped environment as it is)."""
    shipped = load_config(env_name, ROOT / "config", served=False)
    if base is None and asked in (None, shipped.serving.backend):
        return None
    config_dir = work / "config-base"
    shutil.rmtree(config_dir, ignore_errors=True)
    shutil.copytree(ROOT / "config", config_dir, ignore=shutil.ignore_patterns("*.model.json"))
    name = shipped.base_model.name
    if base is not None:
        name = record_name(base.name)
        _tool("tools.base_model", str(base), "--hub-id", name, "--output", str(config_dir / "models"), "--force")
    record = read_catalog(config_dir)[name].record
    backend = loading_backend(record.model_type, asked, shipped.serving.backend)
    spec = backends.backend(backend)
    if spec.serves_compiled and not spec.compiles_at_start_up:  # its container serves only an exported model
        _tool("tools.config_edit", str(config_dir / f"{env_name}.yaml"), "training.neuron_compile.enabled=true")
    _tool("tools.profile", "--model", name, "--backend", backend, "--env", env_name, "--config-dir", str(config_dir))
    config = load_config(env_name, config_dir, served=False)
    say(
        f"base {record.hub_id}: {record.model_type} ({record.architecture}), {record.parameters:,} parameters, tied "
        f"embeddings {str(record.tie_word_embeddings).lower()}; {env_name} trains {config.training.base_model_key} "
        f"and serves it with {backend} (config: {config_dir}, `make profile`'s profile)"
    )
    return LocalBase(config_dir=config_dir, backend=backend, record=record)
