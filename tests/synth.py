"""Synthesize the real app in-process with the CLI's context, for tests (one jsii process per session)."""

from __future__ import annotations

import dataclasses
import fcntl
import json
import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

from aws_cdk import App
from aws_cdk.cx_api import CloudAssembly

from stacks.application import build_app
from stacks.config import AppConfig, load_config

ROOT = Path(__file__).resolve().parents[1]


def with_catalog(config_dir: Path) -> Path:
    """config_dir/models/: a copy of the shipped model catalog, so a case's environment names recorded bases (and
    a case may add a record of its own)."""
    models = Path(config_dir) / "models"
    if not models.exists():
        shutil.copytree(ROOT / "config" / "models", models)
    return config_dir


def add_record(config_dir: Path, hub_id: str, like: str, **changes: Any) -> str:
    """config_dir/models/<name>.yaml: the shipped record `like` with `changes`, as `hub_id`; returns hub_id."""
    import yaml

    from stacks.config.base_model_record import record_name

    with_catalog(config_dir)
    record = yaml.safe_load((ROOT / "config" / "models" / f"{like}.yaml").read_text())
    record.update(hub_id=hub_id, source=hub_id, **changes)
    (Path(config_dir) / "models" / f"{record_name(hub_id)}.yaml").write_text(yaml.safe_dump(record, sort_keys=False))
    return hub_id


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
    """`config` with top-level fields replaced; what comes from the files (init=False) is kept: env_name, source,
    the served model (the lock) and the training base's record."""
    changed = dataclasses.replace(config, **changes)
    for name in ("env_name", "source", "model", "base_model"):
        object.__setattr__(changed, name, getattr(config, name))
    return changed


# Each environment after the first-deploy guide's last step (docs/aws.md): the lock a promotion of the Training
# workflow's version writes, config/<env>.model.json (and dev's Pruning run's model keys). The shipped files
# serve nothing yet.
ACCOUNT, REGION = "123456789012", "us-east-1"
CODE_ASSET_HASH = "5d41402abc4b2a76b9719d911017c5925d41402abc4b2a76b9719d911017c592"
STAGING_JOB = "llm-inf2-staging-5d41402abc4b2a76b9719d911017c592-0-0"
FACTS = {  # each model's config.json facts, as the Training workflow records them (strings in the package)
    "tinyllama": {
        "base_model": "TinyLlama/TinyLlama-1.1B-Chat-v1.0",
        "model_type": "llama",
        "architecture": "LlamaForCausalLM",
        "parameters": 1100048384,
        "size_bytes": 2200119864,
        "dtype": "bfloat16",
        "context_length": 2048,
        "num_attention_heads": 32,
        "num_key_value_heads": 4,
        "chat_template": True,
    },
    "llama2": {
        "base_model": "s3://llm-inf2-prod-data-artifactbucket-x1/base-models/llama-2-7b-chat-hf/",
        "model_type": "llama",
        "architecture": "LlamaForCausalLM",
        "parameters": 6738415616,
        "size_bytes": 13476839424,
        "dtype": "float16",
        "context_length": 4096,
        "num_attention_heads": 32,
        "num_key_value_heads": 32,
        "chat_template": True,
    },
    "qwen2.5": {
        "base_model": "Qwen/Qwen2.5-7B-Instruct",
        "model_type": "qwen2",
        "architecture": "Qwen2ForCausalLM",
        "parameters": 7615616512,
        "size_bytes": 15231233024,
        "dtype": "bfloat16",
        "context_length": 32768,
        "num_attention_heads": 28,
        "num_key_value_heads": 4,
        "chat_template": True,
    },
}
SERVED = {  # env: (model, version, training job, merged prefix, compiled prefix, instance type)
    "dev": (
        "tinyllama",
        3,
        "llm-inf2-dev-20261119-0-0",
        "models/tinyllama-1.1b-chat-v1.0/",
        "models/tinyllama-1.1b-chat-v1.0/neuron/tp2-np2048-bs4-fp16-neuronx-cc-2.15.141.0/"
        "llm-inf2-dev-20261119-n-0/output/model/",
        "ml.inf2.xlarge",
    ),
    "prod": (
        "llama2",
        2,
        "llm-inf2-prod-20261120-0-0",
        "models/llama2-7b-qlora-20261120/merged/",
        "models/llama2-7b-qlora-20261120/neuron/tp8-np4096-bs8-fp16-neuronx-cc-2.15.141.0/"
        "llm-inf2-prod-20261120-n-0/output/model/",
        "ml.inf2.24xlarge",
    ),
    "staging": (
        "qwen2.5",
        5,
        STAGING_JOB,
        f"models/{STAGING_JOB}/output/model/",
        f"models/{STAGING_JOB}/neuron/bs4-seq4096-tp2/llm-inf2-staging-5d41402abc4b2a76b9719d911017c592-n-0/output/model/",
        "ml.inf2.8xlarge",
    ),
}
# What LMI's partition recorded in each compiled model's config.json (`neuron`), as RegisterCompiledModel
# registers it: dev's and prod's serving.lmi shapes, neuronx-cc of djl-inference:0.30.0-neuronx-sdk2.20.1.
COMPILED = {
    env: {
        "tensor_parallel_degree": tp,
        "n_positions": n,
        "batch_size": b,
        "dtype": "f16",
        "compiler_version": "2.15.141.0+d3cfc8ca",
    }
    for env, (tp, n, b) in {"dev": (2, 2048, 4), "prod": (8, 4096, 8)}.items()
}
SERVED_BACKENDS = {"dev": ("lmi_neuronx", "lmi_neuronx"), "prod": ("lmi_neuronx", "lmi_neuronx")}
DEV_PRUNING_RUN = "pruning/llm-inf2-dev-20261129000000000/"
DEV_PRUNING_KEYS = {
    "base_endpoint": f"{DEV_PRUNING_RUN}base/model.tar.gz",
    "pruned_endpoint": f"{DEV_PRUNING_RUN}jobs/llm-inf2-dev-20261129000000000-export-0/output/model.tar.gz",
}


def group_of(env_name: str) -> str:
    """A model package group's name as the Data stack generates it (lower case, in the package ARNs)."""
    return f"llminf2{env_name}data-models"


def image_in(name: str, region: str = REGION) -> str:
    """stacks/images.json's URI of `name` in `region` (what a package registered there names)."""
    from stacks.image_table import image_table

    return image_table()[name][region]


def lock_document(env_name: str, **changes) -> dict:
    """config/<env>.model.json as the promotion writes it for SERVED[env_name]'s version; `changes` replace
    top-level keys (and `facts`/`serving`/`lineage` keys given as `facts__parameters=...`)."""
    model, number, job, prefix, compiled, instance_type = SERVED[env_name]
    backend, image = SERVED_BACKENDS.get(env_name, ("vllm_neuronx", "vllm_neuronx"))
    document = {
        "model_package_arn": f"arn:aws:sagemaker:{REGION}:{ACCOUNT}:model-package/{group_of(env_name)}/{number}",
        "approval_status": "Approved",
        "model_prefix": prefix,
        "compiled_prefix": compiled,
        "compiled": dict(COMPILED[env_name]) if env_name in COMPILED else None,
        "facts": dict(FACTS[model]),
        "serving": {"backend": backend, "image": image_in(image), "instance_types": [instance_type]},
        "lineage": {
            "training_job": job,
            "dataset": f"s3://llm-inf2-{env_name}-data-artifactbucket-x1/datasets/instructions/",
            "dataset_marker_version_id": "3HL4kqtJlcpXroDTDmJ.rmSpXd3dIbrHY",
            "code_asset_hash": CODE_ASSET_HASH,
            "source_model_package_arn": None,
        },
    }
    for key, value in changes.items():
        section, _, name = key.partition("__")
        if name:
            document[section][name] = value
        else:
            document[section] = value
    return document


def with_lock(config: AppConfig, document: dict) -> AppConfig:
    """`config` serving `document` (a lock's JSON value), through the checks the loader runs."""
    from stacks.config.model_lock import parse_lock
    from stacks.config.served_model import with_model

    source = f"config/{config.env_name}.model.json"
    return with_model(config, parse_lock(document, source), source)


def served(config: AppConfig, **lock_changes) -> AppConfig:
    """`config` serving its recorded version (and dev's pruning endpoints at their model keys); `lock_changes`:
    another promotion (lock_document's changes)."""
    from stacks.config.pruning import EncoderEndpointConfig

    if config.env_name not in SERVED or config.serving is None:
        return config
    config = with_lock(config, lock_document(config.env_name, **lock_changes))
    if config.env_name == "dev":
        endpoints = {name: EncoderEndpointConfig(model_key=key) for name, key in DEV_PRUNING_KEYS.items()}
        config = replaced(config, pruning=dataclasses.replace(config.pruning, **endpoints))
    return config


def load_served(env_name: str, **lock_changes) -> AppConfig:
    return served(load_config(env_name, ROOT / "config"), **lock_changes)


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
