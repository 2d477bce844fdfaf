"""UPLOAD=<env>: the model's files into that environment's artifact bucket under base-models/<name>/ (SSE-KMS
with the environment's key), then config/<env>.yaml's training.base_model_key pointed at them.

This is the isolated path (prod, no internet at training time) and the way to train a gated model without a hub
token in AWS. The bucket and key come from the environment's deployed Data stack, as promotion finds them
(tools/promote_model). A hub id is copied from a snapshot_download of the commit the record names.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from stacks.config.base_model_record import BaseModelRecord, key_folder, record_name
from stacks.config.model_catalog import is_hub_id
from tools.base_model.model import Refused
from tools.base_model.s3 import listed, split_uri
from tools.config_edit import edit
from tools.promote_model import Refused as PromotionRefused
from tools.promote_model.aws import data_outputs, environment
from tools.promote_model.model import DataOutputs, Environment

BASE_MODEL_KEY = "training.base_model_key"
MODEL_ID = "training.hyperparameters.model_id"
SKIPPED = (".git", ".cache", ".gitattributes")  # a clone's or hf download's bookkeeping, not the model


@dataclass(frozen=True)
class Target:
    env: Environment
    data: DataOutputs

    @property
    def extra(self) -> dict[str, str]:
        return {"ServerSideEncryption": "aws:kms", "SSEKMSKeyId": self.data.key_arn}


@dataclass(frozen=True)
class Uploaded:
    prefix: str  # s3://bucket/base-models/<name>/
    objects: int
    config_changed: bool
    removed_model_id: str | None


def target(name: str, config_dir: Path, profile: str | None, region: str | None, endpoint_url: str | None) -> Target:
    """The environment and its deployed Data stack, or the one line saying what is missing (before anything is
    written: a refused upload leaves the record, the bucket and the config as they were)."""
    try:
        env = environment(name, config_dir, profile, region, endpoint_url)
        return Target(env, data_outputs(env))
    except PromotionRefused as err:
        raise Refused(str(err)) from None


def _local_files(folder: Path) -> list[Path]:
    return sorted(
        path
        for path in folder.rglob("*")
        if path.is_file() and not any(part in SKIPPED for part in path.relative_to(folder).parts)
    )


def put_files(s3, files: list[Path], folder: Path, to: Target, prefix: str) -> int:
    """Each of `files` (below `folder`) under `prefix`, SSE-KMS with the environment's key; how many."""
    for path in files:
        key = prefix + path.relative_to(folder).as_posix()
        s3.upload_file(str(path), to.data.bucket, key, ExtraArgs=to.extra)
    return len(files)


def _copy_s3(s3, uri: str, to: Target, prefix: str) -> int:
    bucket, source_prefix = split_uri(uri)
    keys = listed(s3, bucket, source_prefix)
    for key in keys:
        copied = prefix + key[len(source_prefix) :]
        s3.copy({"Bucket": bucket, "Key": key}, to.data.bucket, copied, ExtraArgs=to.extra)
    return len(keys)


def verify_encrypted(s3, to: Target, prefix: str, count: int) -> None:
    """Every object under the prefix is encrypted with the environment's key (a bucket default could differ)."""
    keys = listed(s3, to.data.bucket, prefix)
    for key in keys:
        head = s3.head_object(Bucket=to.data.bucket, Key=key)
        if head.get("SSEKMSKeyId") != to.data.key_arn:
            raise RuntimeError(f"s3://{to.data.bucket}/{key} is encrypted with {head.get('SSEKMSKeyId')}")
    if len(keys) < count:
        raise RuntimeError(f"s3://{to.data.bucket}/{prefix}: {len(keys)} objects, {count} were copied")


def _snapshot(record: BaseModelRecord) -> Path:
    """The repository's files at the recorded commit. snapshot_download answers a failed listing with whatever
    the cache holds (here: the files the record was read from), so every file the hub lists must be there."""
    from huggingface_hub import HfApi, snapshot_download

    listed = {sibling.rfilename for sibling in HfApi().model_info(record.hub_id, revision=record.revision).siblings}
    folder = Path(snapshot_download(record.hub_id, revision=record.revision))
    missing = sorted(name for name in listed if not (folder / name).is_file())
    if missing:
        shown = ", ".join(missing[:3])
        raise Refused(
            f"{record.hub_id}@{record.revision}: the download lacks {len(missing)} of its files ({shown}); run "
            "again where the hub can be reached, nothing uploaded"
        )
    return folder


def source_folder(record: BaseModelRecord, model: str) -> Path | str:
    """What is copied: the folder, the s3:// URI, or a hub id's complete download (before anything is written)."""
    if model.startswith("s3://") or Path(model).is_dir():
        return model if model.startswith("s3://") else Path(model)
    return _snapshot(record)


def upload(record: BaseModelRecord, source: Path | str, to: Target, config_dir: Path) -> Uploaded:
    """Copy `source` (source_folder's) under the record's key folder, then point the environment's config at it;
    a hub id in training.hyperparameters.model_id goes (the copy replaces it)."""
    s3 = to.env.client("s3")
    prefix = key_folder(record_name(record.hub_id))
    if isinstance(source, str):
        count = _copy_s3(s3, source, to, prefix)
    else:
        count = put_files(s3, _local_files(source), source, to, prefix)
    verify_encrypted(s3, to, prefix, count)
    config_file = config_dir / f"{to.env.name}.yaml"
    model_id = to.env.config.training.hyperparameters.get("model_id")
    hub_model_id = model_id if is_hub_id(model_id) else None
    changed = edit(config_file, {BASE_MODEL_KEY: prefix}, [MODEL_ID] if hub_model_id else [])
    return Uploaded(f"s3://{to.data.bucket}/{prefix}", count, changed, hub_model_id)
