"""A model folder in S3 (s3://bucket/prefix/): config.json and the tokenizer's files, and each safetensors
header through two ranged GetObjects (its 8-byte length, then the header), never the tensors."""

from __future__ import annotations

from typing import Any

from tools.base_model.model import FACTS, TOKENIZER_CONFIG, ModelFiles, Refused, chat_template_in, parse_json

ACCESS_DENIED = {"AccessDenied", "AccessDeniedException", "AllAccessDisabled", "KMS.AccessDeniedException"}


def split_uri(uri: str) -> tuple[str, str]:
    """(bucket, prefix ending in /) of s3://bucket/prefix."""
    bucket, _, prefix = uri.removeprefix("s3://").partition("/")
    if not bucket:
        raise Refused(f"{uri}: no bucket; give s3://<bucket>/<prefix>/")
    return bucket, (prefix.rstrip("/") + "/") if prefix else ""


def listed(s3, bucket: str, prefix: str) -> list[str]:
    """The object keys under the prefix, this folder only (a model folder is flat)."""
    keys: list[str] = []
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix, Delimiter="/"):
        keys += [entry["Key"] for entry in page.get("Contents", [])]
    return keys


def _body(s3, bucket: str, key: str, byte_range: str | None = None) -> bytes:
    extra = {"Range": byte_range} if byte_range else {}
    return s3.get_object(Bucket=bucket, Key=key, **extra)["Body"].read()


def _json(s3, bucket: str, key: str) -> dict[str, Any]:
    return parse_json(_body(s3, bucket, key), f"s3://{bucket}/{key}")


def _header(s3, bucket: str, key: str) -> dict[str, dict[str, Any]]:
    length = FACTS.header_length(_body(s3, bucket, key, "bytes=0-7"), f"s3://{bucket}/{key}")
    return FACTS.parse_header(_body(s3, bucket, key, f"bytes=8-{7 + length}"))


def _tensors(s3, bucket: str, prefix: str, names: set[str]) -> dict[str, dict[str, Any]] | None:
    try:
        return _headers(s3, bucket, prefix, names)
    except (ValueError, KeyError) as err:
        where = f"s3://{bucket}/{prefix}"
        raise Refused(f"{where}: its safetensors headers cannot be read ({err}); nothing written") from None


def _headers(s3, bucket: str, prefix: str, names: set[str]) -> dict[str, dict[str, Any]] | None:
    if FACTS.INDEX_FILE in names:
        weight_map = _json(s3, bucket, prefix + FACTS.INDEX_FILE).get("weight_map") or {}
        files = sorted(set(weight_map.values()))
    else:
        files = sorted(name for name in names if name.endswith(".safetensors"))
    if not files:
        return None
    found: dict[str, dict[str, Any]] = {}
    for name in files:
        found.update(_header(s3, bucket, prefix + name))
    return found


def read_s3(session, uri: str, *, endpoint_url: str | None, revision: str | None, gated: bool) -> ModelFiles:
    """The facts of the model under `uri`, read with `session`'s credentials."""
    from botocore.exceptions import ClientError

    bucket, prefix = split_uri(uri)
    s3 = session.client("s3", endpoint_url=endpoint_url)
    where = f"s3://{bucket}/{prefix}"
    try:
        names = {key[len(prefix) :] for key in listed(s3, bucket, prefix)}
        if "config.json" not in names:
            raise Refused(f"{where}: no config.json; give the prefix of a saved model (config.json, *.safetensors)")
        tokenizer = _json(s3, bucket, prefix + TOKENIZER_CONFIG) if TOKENIZER_CONFIG in names else None
        return ModelFiles(
            source=where,
            config_name=f"{where}config.json",
            config=_json(s3, bucket, prefix + "config.json"),
            tensors=_tensors(s3, bucket, prefix, names),
            chat_template=chat_template_in(names, tokenizer),
            revision=revision,
            gated=gated,
        )
    except ClientError as err:
        code = err.response.get("Error", {}).get("Code", "")
        if code not in ACCESS_DENIED and code != "NoSuchBucket":
            raise
        raise Refused(
            f"{where}: cannot be read ({code}): use credentials that may s3:ListBucket and s3:GetObject there "
            "(and kms:Decrypt on its key)"
        ) from None
