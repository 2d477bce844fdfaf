"""The review's vocabulary: what a warning is, how bad it is, and what a stack's diff holds."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum


class ReviewError(Exception):
    """A failure the tool reports as one line."""


class Kind(StrEnum):
    """What happens to a resource; the value is the label the markdown shows."""

    REPLACED = "REPLACED"
    MAY_BE_REPLACED = "MAY BE REPLACED"
    DELETED = "DELETED"
    ORPHANED = "ORPHANED"
    REPLACED_BY_RENAME = "REPLACED BY RENAME"
    MOVED = "MOVED"
    NEW_ENDPOINT = "NEW ENDPOINT"
    ENDPOINT_UPDATE = "ENDPOINT UPDATE"
    AUTOSCALED_TYPE_CHANGE = "INSTANCE TYPE ON AUTOSCALED VARIANT"
    EXPORT_IN_USE = "EXPORT IN USE"
    HOSTING_SWITCH = "HOSTING SWITCH (REPLACEMENT)"


# the kinds that leave a stateful resource's data behind, in an old resource or nowhere
STATEFUL_REPLACEMENTS = frozenset({Kind.REPLACED, Kind.MAY_BE_REPLACED, Kind.REPLACED_BY_RENAME, Kind.MOVED})


class Severity(StrEnum):
    """How a reviewer should treat a warning; the markdown groups warnings in this order."""

    BLOCKING = "blocking"  # the deploy fails, or data needs a manual step: never merge on autopilot
    ATTENTION = "attention"  # replaced or deleted, clients or history affected; the deploy itself goes through
    ROUTINE = "routine"  # a rollout the stack manages (an endpoint moving onto a new config)


@dataclass(frozen=True)
class ReviewWarning:
    """One resource a reviewer has to think about, and why."""

    stack: str
    logical_id: str
    type: str
    kind: Kind
    message: str
    severity: Severity = Severity.ATTENTION


@dataclass
class StackReport:
    """One stack's changes as the diff engine sorted them, plus its IAM and security-group tables."""

    name: str
    status: str  # changed, unchanged, added, removed
    added: list[dict] = field(default_factory=list)
    changed: list[dict] = field(default_factory=list)
    removed: list[dict] = field(default_factory=list)
    replaced: list[dict] = field(default_factory=list)
    text: str = ""
    iam: dict = field(default_factory=dict)
    security_groups: dict = field(default_factory=dict)
    other_sections: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class Analysis:
    """What the classification found in the engine's diff of every stack."""

    stacks: list[StackReport]
    warnings: list[ReviewWarning]
    iam: list[str]
    security: list[str]


@dataclass(frozen=True)
class EnvironmentCost:
    """An environment's totals on both sides ({part of TOTALS: USD or None}); emulated: never deployed to AWS."""

    env: str
    emulated: bool
    old: dict[str, float | None]
    new: dict[str, float | None]


@dataclass
class Review:
    """Everything the markdown shows; `replaced`, `blocking` and `flagged` are what tests pin down."""

    title: str
    engine: str
    stacks: list[StackReport]
    warnings: list[ReviewWarning]
    iam: list[str]
    security: list[str]
    settings: list[str]
    cost_rows: list[tuple[str, ...]]
    cost_notes: list[str]
    cost_totals: list[EnvironmentCost] = field(default_factory=list)

    @property
    def replaced(self) -> dict[str, list[str]]:
        """{stack: sorted logical ids the engine marks as (maybe) replaced}."""
        return {s.name: sorted(r["logicalId"] for r in s.replaced) for s in self.stacks if s.replaced}

    @property
    def blocking(self) -> list[tuple[str, str, str]]:
        return sorted((w.stack, w.logical_id, w.kind) for w in self.warnings if w.severity == Severity.BLOCKING)

    @property
    def flagged(self) -> list[tuple[str, str, str]]:
        return sorted((w.stack, w.logical_id, w.kind) for w in self.warnings)
