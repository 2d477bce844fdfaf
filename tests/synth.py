"""Synthesize the real app in-process with the CLI's context, for tests (one jsii process per session)."""

from __future__ import annotations

import dataclasses
import fcntl
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from aws_cdk import App
from aws_cdk.cx_api import CloudAssembly

from stacks.application import build_app
from stacks.config import AppConfig, load_config

ROOT = Path(__file__).resolve().parents[1]


def cli_context() -> dict[str, Any]:
    """What `npx cdk synth` hands the app: cdk.json's context plus the CLI's metadata switches."""
    cdk_json = json.loads((ROOT / "cdk.json").read_text())
    return {
        **cdk_json["context"],
        "aws:cdk:enable-path-metadata": cdk_json.get("pathMetadata", True),
        "aws:cdk:enable-asset-metadata": True,
        "aws:cdk:version-reporting": cdk_json.get("versionReporting", True),
    }


def replaced(config: AppConfig, **changes) -> AppConfig:
    """`config` with top-level fields replaced; env_name and source (init=False, from the file) are kept."""
    changed = dataclasses.replace(config, **changes)
    for name in ("env_name", "source"):
        object.__setattr__(changed, name, getattr(config, name))
    return changed


# Each environment after the first-deploy guide's last step (docs/aws.md): the model prefixes the Training
# workflow recorded (and dev's Pruning run's model keys). The shipped files serve nothing yet.
SERVED_PREFIXES = {
    "dev": ("models/tinyllama-1.1b-chat-v1.0/", None),
    "prod": (
        "models/llama2-7b-qlora-20261120/merged/",
        "models/llama2-7b-qlora-20261120/merged/neuron-tp8-np4096-fp16/",
    ),
    "staging": (
        "models/llm-inf2-staging-5d41402abc4b2a76b9719d911017c592-0-0/neuron/bs4-seq4096-tp2/"
        "llm-inf2-staging-5d41402abc4b2a76b9719d911017c592-n-0/output/model/",
        None,
    ),
}
DEV_PRUNING_RUN = "pruning/llm-inf2-dev-20261129000000000/"
DEV_PRUNING_KEYS = {
    "base_endpoint": f"{DEV_PRUNING_RUN}base/model.tar.gz",
    "pruned_endpoint": f"{DEV_PRUNING_RUN}jobs/llm-inf2-dev-20261129000000000-export-0/output/model.tar.gz",
}


def served(config: AppConfig) -> AppConfig:
    """`config` with serving on at its recorded prefix (and dev's pruning endpoints at their model keys)."""
    from stacks.config.pruning import EncoderEndpointConfig

    if config.env_name not in SERVED_PREFIXES or config.serving is None:
        return config
    prefix, graph = SERVED_PREFIXES[config.env_name]
    changes = {"serving": dataclasses.replace(config.serving, model_prefix=prefix, compiled_graph_prefix=graph)}
    if config.env_name == "dev":
        endpoints = {name: EncoderEndpointConfig(model_key=key) for name, key in DEV_PRUNING_KEYS.items()}
        changes["pruning"] = dataclasses.replace(config.pruning, **endpoints)
    return replaced(config, **changes)


def load_served(env_name: str) -> AppConfig:
    return served(load_config(env_name, ROOT / "config"))


def synth(config: AppConfig, outdir: Path) -> CloudAssembly:
    app = App(outdir=str(outdir), context=cli_context())
    build_app(app, config)
    return app.synth()


def synth_env(env_name: str, outdir: Path) -> CloudAssembly:
    """The environment as its file ships (a first deploy: nothing served yet)."""
    return synth(load_config(env_name, ROOT / "config"), outdir)


def synth_served(env_name: str, outdir: Path) -> CloudAssembly:
    """The environment after the first-deploy guide: serving on (what most stack tests check)."""
    return synth(load_served(env_name), outdir)


def templates(assembly: CloudAssembly) -> dict[str, dict]:
    """Templates by stack unit name ('Data', 'Training', ...)."""
    return {stack.stack_name.rsplit("-", 1)[-1]: stack.template for stack in assembly.stacks}


def shared_assembly(tmp_path_factory, name: str, build: Callable[[Path], CloudAssembly]) -> CloudAssembly:
    """`build(folder)` once per test run: under pytest-xdist every worker reads the one folder the first worker to
    ask synthesized (under a file lock in the run's shared temp root, as pytest-xdist's docs share session data),
    instead of each worker synthesizing its own. For assemblies the tests only read."""
    root = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        root = root.parent  # the run's folder, above each worker's own
    folder, done = root / name, root / f"{name}.done"
    with (root / f"{name}.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if done.exists():
            return CloudAssembly(str(folder))
        assembly = build(folder)
        done.touch()
        return assembly


def shipped_assembly(tmp_path_factory, env_name: str) -> CloudAssembly:
    """`synth_env(env_name)`, shared across the run's workers (one folder name for every fixture that asks)."""
    return shared_assembly(tmp_path_factory, f"cdk-shipped-{env_name}", lambda folder: synth_env(env_name, folder))


def served_assembly(tmp_path_factory, env_name: str) -> CloudAssembly:
    """`synth_served(env_name)`, shared across the run's workers."""
    return shared_assembly(tmp_path_factory, f"cdk-{env_name}", lambda folder: synth_served(env_name, folder))
