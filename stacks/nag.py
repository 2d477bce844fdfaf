"""cdk-nag rule packs and every accepted finding, in one reviewable table.

Each acknowledgment names one rule on one resource (by construct path inside its stack) with the
reason a security reviewer would accept. `apply_acknowledgments` fails the synth when an entry
matches nothing, so the table cannot rot.
"""

from __future__ import annotations

from dataclasses import dataclass

from aws_cdk import Acknowledgment, App, Stack, Validations
from cdk_nag import AwsSolutionsChecks, HIPAASecurityChecks, NIST80053R5Checks
from constructs import IConstruct

RULE_PACKS = (AwsSolutionsChecks, HIPAASecurityChecks, NIST80053R5Checks)

_LOG_BUCKET = (
    "This bucket receives S3 server access logs of the artifact bucket; logging it to itself or to "
    "another bucket would recurse."
)
_REPLICATION = (
    "Cross-region replication is a per-organisation DR decision; the bucket is versioned, retained and "
    "KMS-encrypted, and replication can be added without replacing it."
)


@dataclass(frozen=True)
class Acknowledged:
    """One accepted finding: stack unit (e.g. 'Data'), construct path inside it, rule id, reason."""

    unit: str
    path: str
    rule: str
    reason: str


ACKNOWLEDGED: tuple[Acknowledged, ...] = (
    Acknowledged("Data", "AccessLogBucket", "AwsSolutions-S1", _LOG_BUCKET),
    Acknowledged("Data", "AccessLogBucket", "HIPAA.Security-S3BucketLoggingEnabled", _LOG_BUCKET),
    Acknowledged("Data", "AccessLogBucket", "NIST.800.53.R5-S3BucketLoggingEnabled", _LOG_BUCKET),
    Acknowledged(
        "Data",
        "AccessLogBucket",
        "HIPAA.Security-S3DefaultEncryptionKMS",
        "S3 server access logging only delivers to SSE-S3 buckets; the logs hold request metadata, not data.",
    ),
    Acknowledged(
        "Data",
        "AccessLogBucket",
        "NIST.800.53.R5-S3DefaultEncryptionKMS",
        "S3 server access logging only delivers to SSE-S3 buckets; the logs hold request metadata, not data.",
    ),
    Acknowledged("Data", "AccessLogBucket", "HIPAA.Security-S3BucketReplicationEnabled", _REPLICATION),
    Acknowledged("Data", "AccessLogBucket", "NIST.800.53.R5-S3BucketReplicationEnabled", _REPLICATION),
    Acknowledged("Data", "ArtifactBucket", "HIPAA.Security-S3BucketReplicationEnabled", _REPLICATION),
    Acknowledged("Data", "ArtifactBucket", "NIST.800.53.R5-S3BucketReplicationEnabled", _REPLICATION),
)


def add_rule_packs(app: App) -> None:
    """Run every pack at synth; an unacknowledged finding makes `app.synth()` fail."""
    Validations.of(app).add_plugins(*(pack(app) for pack in RULE_PACKS))


def _find(stack: Stack, path: str) -> IConstruct | None:
    node: IConstruct = stack
    for part in path.split("/"):
        child = node.node.try_find_child(part)
        if child is None:
            return None
        node = child
    return node


def apply_acknowledgments(stacks: dict[str, Stack]) -> None:
    """Attach each table entry to its construct; an entry whose construct is gone is an error."""
    for entry in ACKNOWLEDGED:
        stack = stacks.get(entry.unit)
        if stack is None:
            continue
        target = _find(stack, entry.path)
        if target is None:
            raise LookupError(f"nag acknowledgment {entry.rule} points at missing {entry.unit}/{entry.path}")
        Validations.of(target).acknowledge(Acknowledgment(id=entry.rule, reason=entry.reason))
