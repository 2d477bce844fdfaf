"""Cross-stack exports: a removed export that a deployed stack still imports fails the deploy."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from local.cloud_assembly import StackArtifact
from tools.review_diff.model import Kind, ReviewWarning, Severity


def _imports(value: Any) -> set[str]:
    """Every literal export name a template fragment imports with Fn::ImportValue."""
    if isinstance(value, dict):
        found = set()
        for key, inner in value.items():
            if key == "Fn::ImportValue" and isinstance(inner, str):
                found.add(inner)
            else:
                found |= _imports(inner)
        return found
    if isinstance(value, list):
        return set().union(*(_imports(v) for v in value)) if value else set()
    return set()


def _exports(template: dict) -> dict[str, str]:
    """{export name: output id} of a template's literal Export names."""
    return {
        out["Export"]["Name"]: oid
        for oid, out in (template.get("Outputs") or {}).items()
        if isinstance(out.get("Export", {}).get("Name"), str)
    }


def _importers(stacks: dict[str, StackArtifact]) -> dict[str, set[str]]:
    """{export name: the stacks that import it}."""
    imported_by: dict[str, set[str]] = defaultdict(set)
    for name, art in stacks.items():
        for export in _imports(art.template):
            imported_by[export].add(name)
    return imported_by


def _in_use(stack: str, output_id: str, export: str, users: list[str]) -> ReviewWarning:
    return ReviewWarning(
        stack,
        output_id,
        "AWS::CloudFormation::Output",
        Kind.EXPORT_IN_USE,
        (
            f"export `{export}` is removed while deployed stack(s) {', '.join(f'`{u}`' for u in users)} "
            "import it: CloudFormation refuses to delete an export in use, so this stack's update fails. "
            "Keep the export one more deploy (CDK: `stack.export_value(...)` of the old value), deploy, "
            "then remove it; or rename back"
        ),
        Severity.BLOCKING,
    )


def exports_in_use(base: dict[str, StackArtifact], head: dict[str, StackArtifact]) -> list[ReviewWarning]:
    """A removed export that a deployed (base) stack imports: CloudFormation refuses to delete an export in use.

    The exporting stack deploys first (the importers depend on it), so while the deployed importer still
    holds the old Fn::ImportValue, the exporter's update fails, even when the new importer no longer needs it."""
    imported_by = _importers(base)
    found = []
    for name in sorted(set(base)):
        exported = _exports(base[name].template)
        removed = set(exported) - set(_exports(head[name].template) if name in head else {})
        for export in sorted(removed):
            users = sorted(imported_by.get(export, set()) - {name})
            if users:
                found.append(_in_use(name, exported[export], export, users))
    return found
