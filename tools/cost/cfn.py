"""Reading CloudFormation template fragments: resources, references, literal integers."""

from __future__ import annotations

from typing import Any


def resources(template: dict) -> dict[str, dict]:
    return template.get("Resources", {}) or {}


def ref_target(value: Any) -> str | None:
    """The logical id a Ref or Fn::GetAtt points at; None for anything else."""
    if isinstance(value, dict):
        if "Ref" in value:
            return value["Ref"]
        if "Fn::GetAtt" in value:
            att = value["Fn::GetAtt"]
            return att[0] if isinstance(att, list) else str(att).split(".")[0]
    return None


def as_int(value: Any, default: int) -> int:
    """A literal count; a token or a missing value counts as `default`."""
    try:
        return int(value)
    except (TypeError, ValueError):
        return default
