"""The version's objects in S3: every one readable before anything is copied, each copy under the target's key."""

from __future__ import annotations

from tools.promote_model.aws import ACCESS_DENIED, error_code
from tools.promote_model.model import GRANTS, Artifacts, DataOutputs, Refused


def _listed(s3, bucket: str, prefix: str) -> list[str]:
    keys: list[str] = []
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
        keys += [o["Key"] for o in page.get("Contents", [])]
    return keys


def readable_objects(s3, artifacts: Artifacts, arn: str, who: str) -> dict[str, list[str]]:
    """Every object under the version's prefixes, each prefix non-empty, the first one read through (a ranged
    GetObject needs s3:GetObject and kms:Decrypt on the source key)."""
    from botocore.exceptions import ClientError

    found = {}
    for prefix in artifacts.prefixes:
        where = f"s3://{artifacts.bucket}/{prefix}"
        try:
            keys = _listed(s3, artifacts.bucket, prefix)
            if keys:
                s3.get_object(Bucket=artifacts.bucket, Key=keys[0], Range="bytes=0-0")["Body"].read()
        except ClientError as err:
            if error_code(err) not in ACCESS_DENIED:
                raise
            raise Refused(
                f"{arn}: {who} cannot read {where} ({error_code(err)}): grant s3:ListBucket/s3:GetObject on the "
                f"source bucket and kms:Decrypt on its key ({GRANTS})"
            ) from None
        if not keys:
            raise Refused(f"{arn}: artifacts missing: nothing under {where}; the version's model is not there")
        found[prefix] = keys
    return found


def copy_objects(s3, objects: dict[str, list[str]], source_bucket: str, target: DataOutputs) -> int:
    """Copy every object to the same key in the target bucket, SSE-KMS with the target's key (multipart above
    the transfer threshold), then check each copy is there under that key."""
    extra = {"ServerSideEncryption": "aws:kms", "SSEKMSKeyId": target.key_arn}
    copied = 0
    for keys in objects.values():
        for key in keys:
            s3.copy({"Bucket": source_bucket, "Key": key}, target.bucket, key, ExtraArgs=extra)
            head = s3.head_object(Bucket=target.bucket, Key=key)
            if head.get("SSEKMSKeyId") != target.key_arn:
                raise RuntimeError(f"s3://{target.bucket}/{key} is encrypted with {head.get('SSEKMSKeyId')}")
            copied += 1
    return copied
