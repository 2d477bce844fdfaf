"""Read what `cdk synth` wrote (cdk.out/manifest.json): the one reader the deployer and the reviewer share.

Each stack artifact carries its template, environment region, termination protection, the stacks it depends
on, its asset manifests and the construct path of every logical id (from the metadata).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from graphlib import TopologicalSorter
from pathlib import Path

STACK = "aws:cloudformation:stack"
ASSET_MANIFEST = "cdk:asset-manifest"


@dataclass(frozen=True)
class StackArtifact:
    artifact_id: str
    stack_name: str
    template_file: Path
    region: str | None  # None: environment-agnostic
    termination_protection: bool
    depends_on: tuple[str, ...] = ()
    asset_manifests: tuple[Path, ...] = ()
    paths: dict[str, str] = field(default_factory=dict)  # logical id -> construct path

    def template_body(self) -> str:
        return self.template_file.read_text(encoding="utf-8")

    @property
    def template(self) -> dict:
        return json.loads(self.template_body())


def _metadata(directory: Path, artifact: dict) -> dict[str, list]:
    entries = dict(artifact.get("metadata") or {})
    extra = artifact.get("additionalMetadataFile")
    if extra and (directory / extra).is_file():
        entries.update(json.loads((directory / extra).read_text(encoding="utf-8")))
    return entries


def _logical_id_paths(directory: Path, artifact: dict) -> dict[str, str]:
    paths = {}
    for path, entries in _metadata(directory, artifact).items():
        for entry in entries:
            if entry.get("type") == "aws:cdk:logicalId" and isinstance(entry.get("data"), str):
                paths[entry["data"]] = path
    return paths


def _region(artifact: dict) -> str | None:
    env = artifact.get("environment", "")
    region = env.rsplit("/", 1)[-1] if env.startswith("aws://") else None
    return None if region in (None, "unknown-region") else region


class CloudAssemblyReader:
    """The stacks of one cloud assembly directory, by artifact id."""

    def __init__(self, directory: str | Path) -> None:
        self.directory = Path(directory)
        manifest = json.loads((self.directory / "manifest.json").read_text(encoding="utf-8"))
        artifacts = manifest.get("artifacts", {})

        def of_type(ids: list[str], kind: str) -> list[str]:
            return [d for d in ids if artifacts.get(d, {}).get("type") == kind]

        self.stacks: dict[str, StackArtifact] = {}
        for artifact_id, artifact in sorted(artifacts.items()):
            if artifact.get("type") != STACK:
                continue
            deps = artifact.get("dependencies", [])
            props = artifact.get("properties", {})
            self.stacks[artifact_id] = StackArtifact(
                artifact_id=artifact_id,
                stack_name=props.get("stackName") or artifact.get("displayName") or artifact_id,
                template_file=self.directory / props["templateFile"],
                region=_region(artifact),
                termination_protection=bool(props.get("terminationProtection", False)),
                depends_on=tuple(of_type(deps, STACK)),
                asset_manifests=tuple(
                    self.directory / artifacts[d]["properties"]["file"] for d in of_type(deps, ASSET_MANIFEST)
                ),
                paths=_logical_id_paths(self.directory, artifact),
            )

    def by_name(self) -> dict[str, StackArtifact]:
        return {s.stack_name: s for s in self.stacks.values()}

    def in_dependency_order(self, names: list[str] | None = None) -> list[StackArtifact]:
        """Stacks (all, or the named ones plus what they depend on), dependencies first."""
        by_name = self.by_name()
        wanted = set(self.stacks) if names is None else set()
        pending = [] if names is None else [by_name[n].artifact_id if n in by_name else n for n in names]
        while pending:
            artifact_id = pending.pop()
            if artifact_id not in self.stacks:
                raise KeyError(f"no stack {artifact_id!r} in {self.directory}; have {sorted(by_name)}")
            if artifact_id not in wanted:
                wanted.add(artifact_id)
                pending.extend(self.stacks[artifact_id].depends_on)
        graph = {a: [d for d in self.stacks[a].depends_on if d in wanted] for a in sorted(wanted)}
        return [self.stacks[a] for a in TopologicalSorter(graph).static_order()]


def assembly_dirs(folder: str | Path) -> list[Path]:
    """`folder` itself when it is a cloud assembly, else every assembly one level below it (cdk.out/<env>/)."""
    folder = Path(folder)
    if (folder / "manifest.json").is_file():
        return [folder]
    return sorted(p.parent for p in folder.glob("*/manifest.json"))
