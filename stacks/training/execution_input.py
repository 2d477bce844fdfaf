"""The execution input of the training state machine, validated in one place (no CDK: the tool imports it).

tools/start_training.py validates with it before any execution starts; the EventBridge rule builds the
same shape; the state machine re-checks what it can (bucket, prefix, string values, known names, the marker).

    {"train_data": "s3://<artifact bucket>/datasets/<key, folder/ or folder/_READY>",
     "hyperparameters": {"<name>": "<value>"},
     "eval_data": "s3://<artifact bucket>/datasets/...",   # optional: the job's `eval` channel
     "dataset_marker_version_id": "<S3 version id>"}       # optional: set by the rule from the marker's event

A completion marker `datasets/<name>/_READY` (what the rule passes) stands for its folder `datasets/<name>/`:
the tool sends the folder, as the state machine's DatasetMarker state makes it. The registry records the marker's
version id as the dataset's lineage (a run the tool starts has no marker event: it records `absent`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from ..code_contract.qlora import hyperparameter_problem, merge_problem
from ..config.training import TrainingConfig
from ..shared.bucket_layout import DATASET_READY_MARKER, DATASETS_PREFIX
from .outcomes import MARKER_VERSION_KEY

KEYS = ("train_data", "hyperparameters", "eval_data", MARKER_VERSION_KEY)
MAX_VERSION_ID = 256  # a package metadata value's limit (CreateModelPackage CustomerMetadataValue)
_S3_URI = re.compile(r"s3://([a-z0-9][a-z0-9.-]{1,61}[a-z0-9])/(.+)")


class InputError(ValueError):
    """A malformed execution input; str() is one line naming the field and the fix."""

    def __init__(self, field: str, problem: str) -> None:
        self.field = field
        self.problem = problem
        super().__init__(f"{field}: {problem}")


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def split_s3_uri(value: Any, field: str = "train_data") -> tuple[str, str]:
    """(bucket, key) of an s3:// URI whose key lies under datasets/; `field` names it in errors."""
    if not isinstance(value, str):
        raise InputError(field, f"got {_short(value)}; expected an s3://<bucket>/{DATASETS_PREFIX}... string")
    match = _S3_URI.fullmatch(value)
    if not match:
        raise InputError(field, f"got {_short(value)}; expected s3://<bucket>/{DATASETS_PREFIX}<key>")
    bucket, key = match.groups()
    if not key.startswith(DATASETS_PREFIX) or key == DATASETS_PREFIX:
        raise InputError(field, f"got {_short(value)}; the key must be under {DATASETS_PREFIX} (not the prefix)")
    if any(part in ("", ".", "..") for part in key.rstrip("/").split("/")) or re.search(r"\s", key):
        raise InputError(field, f"got {_short(value)}; no empty, '.' or '..' segments and no whitespace")
    return bucket, key


def _marker_folder(value: str, key: str) -> str:
    """`datasets/<name>/` of the marker key `datasets/<name>/_READY`; any other marker is refused."""
    if len(key.split("/")) != 3:  # datasets, <name>, _READY (empty segments are refused before)
        raise InputError(
            "train_data",
            f"got {_short(value)}; a dataset completion marker must be "
            f"{DATASETS_PREFIX}<name>/{DATASET_READY_MARKER} (one folder under {DATASETS_PREFIX})",
        )
    return key.removesuffix(DATASET_READY_MARKER)


def _dataset(data: Mapping[str, Any], field: str, bucket: str | None) -> str:
    """The dataset URI at `field`, in the artifact bucket (when `bucket` is known) under datasets/; a
    train_data completion marker becomes its folder."""
    data_bucket, key = split_s3_uri(data[field], field)
    if bucket is not None and data_bucket != bucket:
        raise InputError(field, f"bucket {data_bucket!r} is not the artifact bucket {bucket!r}")
    if key.rsplit("/", 1)[-1] != DATASET_READY_MARKER:
        return data[field]
    if field != "train_data":
        raise InputError(
            field,
            f"got {_short(data[field])}; give the dataset folder (ending in /): a completion "
            "marker stands for a dataset only as train_data",
        )
    return f"s3://{data_bucket}/{_marker_folder(data[field], key)}"


def _version_id(value: Any) -> str:
    if not isinstance(value, str) or not 0 < len(value) <= MAX_VERSION_ID or re.search(r"\s", value):
        problem = f"got {_short(value)}; expected the marker's S3 version id (1 to {MAX_VERSION_ID} characters)"
        raise InputError(MARKER_VERSION_KEY, problem)
    return value


def _value(name: str, value: Any) -> str:
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        raise InputError(f"hyperparameters.{name}", f"got {_short(value)}; expected a string or a number")
    text = value if isinstance(value, str) else repr(value)
    problem = hyperparameter_problem(name, text) or (merge_problem(text) if name == "merge" else None)
    if problem:
        raise InputError(f"hyperparameters.{name}", problem)
    return text


def validate_execution_input(
    data: Any, *, bucket: str | None, training: TrainingConfig | None = None
) -> dict[str, Any]:
    """The normalized input (hyperparameter values as strings); `bucket` None skips the bucket check;
    `training` (the environment's section) adds the job shape's rules on config + override hyperparameters."""
    if not isinstance(data, Mapping):
        raise InputError("<input>", f"got {_short(data)}; expected an object with {', '.join(KEYS)}")
    unknown = sorted(str(k) for k in data if k not in KEYS)
    if unknown:
        raise InputError(unknown[0], f"unknown key; allowed: {', '.join(KEYS)}")
    if "train_data" not in data:
        raise InputError("train_data", f"missing; expected s3://<bucket>/{DATASETS_PREFIX}<key>")
    checked = {"train_data": _dataset(data, "train_data", bucket)}
    if "eval_data" in data:
        checked["eval_data"] = _dataset(data, "eval_data", bucket)
    if data.get(MARKER_VERSION_KEY) is not None:  # null: the event had none (the machine records `absent`)
        checked[MARKER_VERSION_KEY] = _version_id(data[MARKER_VERSION_KEY])
    overrides = data.get("hyperparameters", {})
    if not isinstance(overrides, Mapping):
        raise InputError("hyperparameters", f"got {_short(overrides)}; expected an object of name: value")
    normalized = {str(name): _value(str(name), value) for name, value in sorted(overrides.items())}
    if training is not None:
        found = training.distribution_problem({**training.hyperparameters, **normalized})
        if found:
            raise InputError(f"hyperparameters.{found[0]}", found[1])
    return {**checked, "hyperparameters": normalized}
