"""Read what `cdk synth` wrote: stacks in dependency order and their asset manifests."""

from __future__ import annotations

import json
from dataclasses import dataclass
from graphlib import TopologicalSorter
from pathlib import Path


@dataclass(frozen=True)
class StackArtifact:
    artifact_id: str
    stack_name: str
    template_file: Path
    termination_protection: bool
    depends_on: tuple[str, ...]
    asset_manifests: tuple[Path, ...]

    def template_body(self) -> str:
        return self.template_file.read_text()


class CloudAssemblyReader:
    """The subset of cdk.out/manifest.json a deployer needs."""

    def __init__(self, directory: str | Path) -> None:
        self.directory = Path(directory)
        manifest = json.loads((self.directory / "manifest.json").read_text())
        artifacts = manifest.get("artifacts", {})
        self.stacks: dict[str, StackArtifact] = {}
        for artifact_id, artifact in artifacts.items():
            if artifact.get("type") != "aws:cloudformation:stack":
                continue
            deps = artifact.get("dependencies", [])
            props = artifact.get("properties", {})
            self.stacks[artifact_id] = StackArtifact(
                artifact_id=artifact_id,
                stack_name=props.get("stackName", artifact_id),
                template_file=self.directory / props["templateFile"],
                termination_protection=bool(props.get("terminationProtection", False)),
                depends_on=tuple(d for d in deps if artifacts.get(d, {}).get("type") == "aws:cloudformation:stack"),
                asset_manifests=tuple(
                    self.directory / artifacts[d]["properties"]["file"]
                    for d in deps
                    if artifacts.get(d, {}).get("type") == "cdk:asset-manifest"
                ),
            )

    def in_dependency_order(self, names: list[str] | None = None) -> list[StackArtifact]:
        """Stacks (all, or the named ones plus what they depend on), dependencies first."""
        by_name = {s.stack_name: s for s in self.stacks.values()}
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
