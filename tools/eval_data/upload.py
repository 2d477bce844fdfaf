"""--upload ENV: the staged folder into the environment's artifact bucket, under training.benchmark.staged_prefix
<task>/, encrypted with the environment's key (SSE-KMS) as every object there; a stale file of an earlier staging
is removed, so the prefix holds exactly this folder."""

from __future__ import annotations

from pathlib import Path

from tools.base_model.s3 import listed
from tools.base_model.upload import Target, put_files, verify_encrypted


def upload(folder: Path, to: Target) -> tuple[str, int]:
    """(s3://bucket/<prefix><task>/, objects written); each object's key checked after the writes."""
    s3 = to.env.client("s3")
    bucket = to.data.bucket
    prefix = f"{to.env.config.training.benchmark.staged_prefix}{folder.name}/"
    files = sorted(path for path in folder.rglob("*") if path.is_file())
    count = put_files(s3, files, folder, to, prefix)
    written = {prefix + path.relative_to(folder).as_posix() for path in files}
    for stale in sorted(set(listed(s3, bucket, prefix)) - written):
        s3.delete_object(Bucket=bucket, Key=stale)
    verify_encrypted(s3, to, prefix, count)
    return f"s3://{bucket}/{prefix}", count
