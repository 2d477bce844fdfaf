"""Folders to and from S3, the way SageMaker moves channels, models and checkpoints (one copy for the job
runner and the pipeline)."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any


def split_s3(uri: str) -> tuple[str, str]:
    if not uri.startswith("s3://"):
        raise ValueError(f"not an s3:// URI: {uri}")
    bucket, _, key = uri[5:].partition("/")
    return bucket, key


def download_prefix(s3: Any, uri: str, target: Path, *, required: bool = True) -> int:
    """S3Prefix semantics: every object whose key starts with the URI's key, placed relative to the
    prefix's folder (so `datasets/x/` and `datasets/x/train.jsonl` both give `train.jsonl`)."""
    bucket, prefix = split_s3(uri)
    base = prefix.rsplit("/", 1)[0] + "/" if "/" in prefix else ""
    count = 0
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
        for item in page.get("Contents", []):
            relative = item["Key"][len(base) :]
            if not relative or relative.endswith("/"):
                continue
            destination = target / relative
            destination.parent.mkdir(parents=True, exist_ok=True)
            # GetObject, not download_file: its HEAD request carries no error message, and SageMaker's
            # FailureReason for a denied download names the action and the object
            with destination.open("wb") as out:
                shutil.copyfileobj(s3.get_object(Bucket=bucket, Key=item["Key"])["Body"], out)
            count += 1
    if count == 0 and required:
        raise LookupError(f'No S3 objects found under S3 URL "{uri}" given in input data source')
    return count


def upload_folder(s3: Any, folder: Path, bucket: str, prefix: str) -> int:
    """Every file below `folder` to `prefix` + its path relative to `folder`, in sorted order; the count."""
    files = sorted(p for p in folder.rglob("*") if p.is_file())
    for path in files:
        s3.upload_file(str(path), bucket, prefix + path.relative_to(folder).as_posix())
    return len(files)
