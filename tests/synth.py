"""Synthesize the real app in-process with the CLI's context, for tests (one jsii process per session)."""

from __future__ import annotations

import dataclasses
import json
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


def synth(config: AppConfig, outdir: Path) -> CloudAssembly:
    app = App(outdir=str(outdir), context=cli_context())
    build_app(app, config)
    return app.synth()


def synth_env(env_name: str, outdir: Path) -> CloudAssembly:
    return synth(load_config(env_name, ROOT / "config"), outdir)


def templates(assembly: CloudAssembly) -> dict[str, dict]:
    """Templates by stack unit name ('Data', 'Training', ...)."""
    return {stack.stack_name.rsplit("-", 1)[-1]: stack.template for stack in assembly.stacks}
