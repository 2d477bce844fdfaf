"""The model lock a promotion writes (config/<env>.model.json), from the version's own records."""

from __future__ import annotations

import difflib
import json
from pathlib import Path

from stacks.config import ConfigError
from stacks.config.model_lock import compiled_from_metadata, facts_from_metadata, lock_text, parse_lock
from stacks.config.served_model import check_lock
from tools.promote_model.model import SOURCE_KEY, Artifacts, Refused
from tools.promote_model.registry import container

LINEAGE_KEYS = ("training_job", "dataset", "dataset_marker_version_id", "code_asset_hash")


def _compiled_section(metadata: dict, arn: str) -> dict | None:
    compiled = compiled_from_metadata(metadata, arn)
    return None if compiled is None else {f: getattr(compiled, f) for f in compiled.__dataclass_fields__}


def candidate_lock(package: dict, artifacts: Artifacts, *, arn: str, source_arn: str | None, lock_source: str):
    """The lock this promotion writes (ModelLock), from the version's own records; ConfigError if one is bad."""
    metadata = package.get("CustomerMetadataProperties", {})
    serving = container(package)
    facts = facts_from_metadata(metadata, package["ModelPackageArn"])
    document = {
        "model_package_arn": arn,
        "approval_status": package.get("ModelApprovalStatus"),
        "model_prefix": artifacts.merged,
        "compiled_prefix": artifacts.compiled,
        "compiled": _compiled_section(metadata, package["ModelPackageArn"]),
        "facts": {f: getattr(facts, f) for f in facts.__dataclass_fields__},
        "serving": {
            "backend": metadata.get("serving_backend", ""),
            "image": serving.get("Image", ""),
            "instance_types": package["InferenceSpecification"].get("SupportedRealtimeInferenceInstanceTypes", []),
        },
        "lineage": {
            **{k: metadata[k] for k in LINEAGE_KEYS if k in metadata},
            SOURCE_KEY: source_arn,
        },
    }
    return parse_lock(document, lock_source)


def fitting_lock(package: dict, artifacts: Artifacts, config, *, arn: str, source_arn: str | None, lock_source: str):
    """The candidate lock, checked against the target's serving profile by the synth's own rules."""
    try:
        lock = candidate_lock(package, artifacts, arn=arn, source_arn=source_arn, lock_source=lock_source)
        check_lock(config, lock, lock_source)
    except ConfigError as err:
        raise Refused(str(err)) from None
    return lock


def with_arn(lock, arn: str, lock_source: str):
    """The lock naming the target's own copy of the version."""
    return parse_lock({**json.loads(lock_text(lock)), "model_package_arn": arn}, lock_source)


def write_lock(lock, lock_file: Path, lock_source: str) -> tuple[bool, str]:
    """(changed, unified diff) after writing the lock; an unchanged lock is not rewritten."""
    text = lock_text(lock)
    before = lock_file.read_text(encoding="utf-8") if lock_file.is_file() else ""
    diff = "".join(
        difflib.unified_diff(before.splitlines(True), text.splitlines(True), f"a/{lock_source}", f"b/{lock_source}")
    )
    if text != before:
        lock_file.write_text(text, encoding="utf-8")
    return text != before, diff
