"""The promotion's vocabulary: a refusal, an environment and its deployed Data stack, a version's artifacts."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

APPROVED, REJECTED = "Approved", "Rejected"
SOURCE_KEY, MERGED_KEY = "source_model_package_arn", "merged_model"  # metadata keys a promoted version carries
GRANTS = "docs/aws.md#promoting-across-accounts"  # where a refusal for a missing cross-account grant points


class Refused(Exception):
    """The version cannot be promoted; the message is the one line that says why and what to do."""


@dataclass(frozen=True)
class DataOutputs:
    """An environment's deployed Data stack: artifact bucket, KMS key, model package group."""

    bucket: str
    key_arn: str
    group: str

    @property
    def account(self) -> str:
        return self.key_arn.split(":")[4]


@dataclass(frozen=True)
class Environment:
    name: str
    config: Any  # AppConfig without its lock (the profile a new version must fit)
    session: Any  # boto3.Session of the account it lives in
    endpoint_url: str | None

    def client(self, service: str):
        return self.session.client(service, endpoint_url=self.endpoint_url)


@dataclass(frozen=True)
class Artifacts:
    """A version's model prefixes in its bucket: the merged model and, for a compiled version, the compiled one."""

    bucket: str
    merged: str
    compiled: str | None

    @property
    def prefixes(self) -> list[str]:
        return [p for p in (self.merged, self.compiled) if p]


@dataclass(frozen=True)
class Promotion:
    """What the CLI prints as `key=value` lines for a CI step, and the lock's diff."""

    model_package_arn: str
    source_model_package_arn: str | None
    lock_file: Path
    lock_changed: bool
    copied_objects: int
    diff: str
