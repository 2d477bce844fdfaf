"""Settings of the stateful data layer (key, artifact bucket, access logs)."""

from __future__ import annotations

from dataclasses import dataclass

from .schema import setting


@dataclass(frozen=True)
class DataConfig:
    """Retention knobs of the artifact and log buckets; the resources themselves are fixed by policy."""

    noncurrent_version_expiration_days: int | None = setting(90, ge=1, le=3650, hint="null keeps every old version")
    abort_incomplete_multipart_upload_days: int = setting(7, ge=1, le=365)
    access_log_expiration_days: int = setting(365, ge=30, le=3650)
