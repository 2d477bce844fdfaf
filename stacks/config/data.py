"""Settings of the stateful data layer (key, artifact bucket, access logs)."""

from __future__ import annotations

from dataclasses import dataclass

from . import aws_limits as aws
from .schema import setting


@dataclass(frozen=True)
class DataConfig:
    """Retention knobs of the artifact and log buckets; the resources themselves are fixed by policy."""

    # S3 documents only "a non-zero positive integer" (aws_limits); the caps are project ones: ten years of old
    # versions or logs, a year for an unfinished upload.
    noncurrent_version_expiration_days: int | None = setting(
        90, le=3650, hint="null keeps every old version", aws=aws.NONCURRENT_DAYS
    )
    # Project: at least a day, so an upload still in progress is not aborted.
    abort_incomplete_multipart_upload_days: int = setting(7, ge=1, le=365, aws=aws.ABORT_MULTIPART_DAYS)
    # Project: at least 30 days of access logs, a month of audit trail.
    access_log_expiration_days: int = setting(365, ge=30, le=3650, aws=aws.EXPIRATION_DAYS)
