"""The Step Functions intrinsics that name a pruning run, its jobs and its S3 prefix (shared by the job requests
and the workflow)."""

from __future__ import annotations

from ..shared.bucket_layout import PRUNING_PREFIX


def run_name_expression(prefix: str) -> str:
    """`<prefix>-yyyyMMddHHmmssSSS` from the execution's start time, split by StartTime into $.clock.parts."""
    parts = ", ".join(f"States.ArrayGetItem($.clock.parts, {i})" for i in range(7))
    return f"States.Format('{prefix}-{{}}{{}}{{}}{{}}{{}}{{}}{{}}', {parts})"


def run_uri(bucket_name: str, suffix: str = "") -> str:
    """An intrinsic for `s3://<bucket>/pruning/<run>/<suffix>`."""
    return f"States.Format('s3://{bucket_name}/{PRUNING_PREFIX}{{}}/{suffix}', $.run.name)"


def job_name(step: str) -> str:
    return f"States.Format('{{}}-{step}-{{}}', $.run.name, $$.State.RetryCount)"


def tuning_job_name() -> str:
    return "States.Format('{}-{}', $.run.name, $$.State.RetryCount)"
