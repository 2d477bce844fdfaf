"""Reading synthesized cloud assemblies, and naming the environment of a stack."""

from __future__ import annotations

from pathlib import Path

from local.cloud_assembly import CloudAssemblyReader, StackArtifact, assembly_dirs
from tools.review_diff.model import ReviewError


def read_assembly(folder: Path) -> dict[str, StackArtifact]:
    """Stacks of a cloud assembly, or of every assembly one level below `folder`, by stack name."""
    directories = assembly_dirs(folder)
    if not directories:
        raise ReviewError(f"{folder}: no manifest.json in it or in its sub-folders (synthesize first)")
    stacks: dict[str, StackArtifact] = {}
    for directory in directories:
        stacks.update(CloudAssemblyReader(directory).by_name())
    return stacks


def stack_env(stack_name: str) -> str:
    """`<app>-<env>-<Unit>` (AppConfig.stack_id): the environment; env names have no hyphen, units none either."""
    parts = stack_name.rsplit("-", 2)
    return parts[1] if len(parts) == 3 else ""
