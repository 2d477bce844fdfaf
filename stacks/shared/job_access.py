"""What a SageMaker job reads, writes, runs and opens, typed, so its execution role is derived from the request.

aws-cdk's SageMakerCreateTrainingJob binds each S3 location with its intent (`bind(this, {forReading: true})`)
and grants the role from it; a location known only at run time (`S3Location.fromJsonExpression`) grants nothing
there. Here every location names its IAM scope instead: the bucket prefix an execution's URI is confined to (the
workflow's input checks and the job names keep it there), or the one object of a code asset.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from aws_cdk import aws_iam as iam
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_s3_assets as s3_assets

from .bucket_layout import (
    BASE_MODELS_PREFIX,
    CHECKPOINTS_PREFIX,
    DATASETS_PREFIX,
    MODELS_PREFIX,
    PRUNING_DATASETS_PREFIX,
    PRUNING_PREFIX,
)
from .placement import Placement

# The order a role lists its prefixes in, whichever step declared them first: a new step adds its prefix
# without moving the others' (prefixes not listed follow in the order they were declared).
PREFIX_ORDER = (
    DATASETS_PREFIX,
    BASE_MODELS_PREFIX,
    MODELS_PREFIX,
    PRUNING_DATASETS_PREFIX,
    PRUNING_PREFIX,
    CHECKPOINTS_PREFIX,
)


class JobAccessError(ValueError):
    """A job step's fixed role lacks what its request reads or writes: app.py prints the message as one line."""


@dataclass(frozen=True)
class S3Scope:
    """The objects a location may name: every object under `key` when it ends with `/` (`reason` says why a job
    needs all of them, cdk-nag's IAM5), else that one object (a code asset)."""

    bucket_arn: str
    key: str
    reason: str = ""

    def __post_init__(self) -> None:
        if self.is_prefix and not self.reason:
            raise ValueError(f"the prefix {self.key!r} needs a reason: why a job reads or writes every object under it")

    @classmethod
    def under(cls, bucket: s3.IBucket, prefix: str, reason: str) -> S3Scope:
        return cls(bucket.bucket_arn, prefix, reason)

    @classmethod
    def asset(cls, asset: s3_assets.Asset) -> S3Scope:
        return cls(asset.bucket.bucket_arn, asset.s3_object_key)

    @property
    def is_prefix(self) -> bool:
        return self.key.endswith("/")

    @property
    def pattern(self) -> str:
        """The key pattern IAM matches: `<prefix>*`, or the object key."""
        return f"{self.key}*" if self.is_prefix else self.key

    @property
    def objects(self) -> str:
        return f"{self.bucket_arn}/{self.pattern}"

    def covers(self, other: S3Scope) -> bool:
        """Every object `other` may name is one this scope names."""
        if self.bucket_arn != other.bucket_arn:
            return False
        return other.key.startswith(self.key) if self.is_prefix else other.key == self.key


@dataclass(frozen=True)
class JobImage:
    """The container a job runs: its URI, and the ECR repository the role pulls it from."""

    uri: str
    repository_arn: str


@dataclass(frozen=True)
class JobSecret:
    """A Secrets Manager secret the job reads itself at start-up (`name` titles the statements' Sids), and the
    customer-managed key it is encrypted with, if any: decrypted only as Secrets Manager decrypts this secret."""

    name: str
    arn: str
    kms_key_arn: str | None = None

    def statements(self) -> list[iam.PolicyStatement]:
        read = iam.PolicyStatement(
            sid=f"Read{self.name}Secret", actions=["secretsmanager:GetSecretValue"], resources=[self.arn]
        )
        if self.kms_key_arn is None:
            return [read]
        region = self.arn.split(":")[3]
        decrypt = iam.PolicyStatement(
            sid=f"Decrypt{self.name}Secret",
            actions=["kms:Decrypt"],
            resources=[self.kms_key_arn],
            conditions={
                "StringEquals": {
                    "kms:ViaService": f"secretsmanager.{region}.amazonaws.com",
                    "kms:EncryptionContext:SecretARN": self.arn,
                }
            },
        )
        return [read, decrypt]


@dataclass(frozen=True)
class Location:
    """One place a job touches: what it is (`channel 'model'`, `output`), the URI (a JSONPath where it is known
    per execution) and its scope."""

    what: str
    uri: str
    scope: S3Scope


@dataclass(frozen=True)
class JobAccess:
    """Everything one job request needs from its execution role, as the request declares it."""

    reads: tuple[Location, ...]
    writes: tuple[Location, ...]
    key_arn: str
    images: tuple[JobImage, ...]
    code: tuple[S3Scope, ...] = ()
    placement: Placement | None = None
    secrets: tuple[JobSecret, ...] = ()


def ordered_prefixes(scopes: Iterable[S3Scope]) -> list[S3Scope]:
    """The prefix scopes, one per (bucket, prefix), in PREFIX_ORDER, then as declared."""
    unique = {(s.bucket_arn, s.key): s for s in reversed(list(scopes)) if s.is_prefix}  # the first declared wins
    first_seen = list(reversed(unique.values()))

    def rank(scope: S3Scope) -> int:
        return PREFIX_ORDER.index(scope.key) if scope.key in PREFIX_ORDER else len(PREFIX_ORDER)

    return sorted(first_seen, key=rank)


def _missing(step: str, role: str, action: str, needed: Sequence[Location], held: Sequence[S3Scope]) -> list[str]:
    return [
        f"{step}: its role {role} lacks {action} on {loc.what} {loc.uri} (under {loc.scope.pattern}); give the step "
        "a role that allows it, or a request without a role so the step derives one"
        for loc in needed
        if not any(h.covers(loc.scope) for h in held)
    ]


def refusals(
    step: str, role: str, access: JobAccess, *, reads: Sequence[S3Scope], writes: Sequence[S3Scope]
) -> list[str]:
    """One line per location a fixed role holding `reads`/`writes` cannot use (reads first)."""
    return [
        *_missing(step, role, "s3:GetObject", access.reads, reads),
        *_missing(step, role, "s3:PutObject", access.writes, writes),
    ]
