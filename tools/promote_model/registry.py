"""The SageMaker model registry: a version's approval, its container and artifacts, its copy in another group."""

from __future__ import annotations

import re

from tools.promote_model.aws import ACCESS_DENIED, error_code
from tools.promote_model.model import (
    APPROVED,
    GRANTS,
    MERGED_KEY,
    REJECTED,
    SOURCE_KEY,
    Artifacts,
    DataOutputs,
    Environment,
    Refused,
)

_S3_URI = re.compile(r"s3://(?P<bucket>[^/]+)/(?P<key>.+/)")


def describe_version(env: Environment, arn: str) -> dict:
    """DescribeModelPackage; a denied call names the grant, anything else says the version is not there."""
    from botocore.exceptions import ClientError

    try:
        return env.client("sagemaker").describe_model_package(ModelPackageName=arn)
    except ClientError as err:
        if error_code(err) in ACCESS_DENIED:
            raise Refused(
                f"{arn}: sagemaker:DescribeModelPackage denied to account of environment {env.name}: grant it with "
                f"the source group's resource policy ({GRANTS})"
            ) from None
        raise Refused(f"{arn}: no such model package version in environment {env.name}'s registry") from None


def _number(text: str | None) -> float | None:
    try:
        return float(text) if text is not None else None
    except ValueError:  # the gate records `none` for a figure the job did not log
        return None


def _benchmark_refusal(arn: str, metadata: dict) -> Refused | None:
    """A version the loss gate passed and the benchmark gate rejected (stacks/training/benchmark_job.py): its
    largest drop of a task's primary metric was above the bound, or the job logged none."""
    drop, bound = metadata.get("benchmark_max_drop_points"), metadata.get("quality_gate_max_benchmark_drop")
    gain, floor = _number(metadata.get("eval_loss_improvement")), _number(metadata.get("quality_gate_min_improvement"))
    if drop is None or bound is None or gain is None or floor is None or gain < floor:
        return None
    if _number(drop) is not None and _number(drop) <= float(bound):
        return None
    return Refused(
        f"{arn}: ModelApprovalStatus: Rejected by the quality gate (benchmark_max_drop_points {drop} > "
        f"max_benchmark_drop {bound}; scores: {metadata.get('benchmark_scores')}); only an Approved version is "
        "promoted: train a model that keeps its base's benchmark scores"
    )


def check_approved(package: dict) -> None:
    """Only an Approved version is served; a quality-gate rejection says by how much it missed."""
    arn, status = package["ModelPackageArn"], package.get("ModelApprovalStatus")
    if status == APPROVED:
        return
    metadata = package.get("CustomerMetadataProperties", {})
    benchmark = _benchmark_refusal(arn, metadata) if status == REJECTED else None
    if benchmark is not None:
        raise benchmark
    gain, floor = metadata.get("eval_loss_improvement"), metadata.get("quality_gate_min_improvement")
    if status == REJECTED and gain is not None and floor is not None:
        raise Refused(
            f"{arn}: ModelApprovalStatus: Rejected by the quality gate (eval_loss_improvement {gain} < "
            f"min_improvement {floor}); only an Approved version is promoted: train a better model"
        )
    raise Refused(
        f"{arn}: ModelApprovalStatus: {status}; only an Approved version is promoted: approve it in the model "
        "registry first (a person's decision)"
    )


def container(package: dict) -> dict:
    """The version's one serving container."""
    arn = package["ModelPackageArn"]
    containers = package.get("InferenceSpecification", {}).get("Containers", [])
    if len(containers) != 1:
        raise Refused(f"{arn}: InferenceSpecification has {len(containers)} containers; expected the serving one")
    return containers[0]


def _prefix_of(uri: str, arn: str, bucket: str, env_name: str) -> str:
    match = _S3_URI.fullmatch(uri or "")
    if not match:
        raise Refused(f"{arn}: model {uri!r} is not an S3 folder (s3://<bucket>/<prefix>/)")
    if match["bucket"] != bucket:
        raise Refused(
            f"{arn}: its model lies in s3://{match['bucket']}/, not in environment {env_name}'s artifact bucket "
            f"{bucket}: promote it from the environment that owns that bucket (--from)"
        )
    return match["key"]


def artifacts_of(env: Environment, package: dict, bucket: str) -> Artifacts:
    """The merged and compiled prefixes of a version: a compiled version (the Training workflow's
    RegisterCompiledModel, or a promoted one) names its merged model in its metadata."""
    arn = package["ModelPackageArn"]
    source = container(package).get("ModelDataSource", {}).get("S3DataSource", {})
    if source.get("S3DataType") != "S3Prefix" or source.get("CompressionType") != "None":
        raise Refused(f"{arn}: ModelDataSource is not an uncompressed S3 prefix ({source})")
    prefix = _prefix_of(source.get("S3Uri", ""), arn, bucket, env.name)
    metadata = package.get("CustomerMetadataProperties", {})
    if MERGED_KEY in metadata:
        return Artifacts(bucket, _prefix_of(metadata[MERGED_KEY], arn, bucket, env.name), prefix)
    if "merged_package" in metadata:
        merged = describe_version(env, metadata["merged_package"])
        uri = container(merged).get("ModelDataSource", {}).get("S3DataSource", {}).get("S3Uri", "")
        return Artifacts(bucket, _prefix_of(uri, arn, bucket, env.name), prefix)
    return Artifacts(bucket, prefix, None)


def registered_copy(sagemaker, group: str, source_arn: str) -> str | None:
    """A version of `group` already promoted from `source_arn` (a rerun registers nothing new)."""
    for page in sagemaker.get_paginator("list_model_packages").paginate(ModelPackageGroupName=group):
        for summary in page["ModelPackageSummaryList"]:
            described = sagemaker.describe_model_package(ModelPackageName=summary["ModelPackageArn"])
            if described.get("CustomerMetadataProperties", {}).get(SOURCE_KEY) == source_arn:
                return summary["ModelPackageArn"]
    return None


def _rebucket(uri: str, source_bucket: str, target_bucket: str) -> str:
    return uri.replace(f"s3://{source_bucket}/", f"s3://{target_bucket}/", 1)


def _copy_request(package: dict, artifacts: Artifacts, target: DataOutputs, from_env: str) -> dict:
    """CreateModelPackage of the copy: the same container and facts, its model (and metrics) in the target bucket."""
    source_arn = package["ModelPackageArn"]
    serving = dict(container(package))
    data = dict(serving["ModelDataSource"]["S3DataSource"])
    data["S3Uri"] = _rebucket(data["S3Uri"], artifacts.bucket, target.bucket)
    serving["ModelDataSource"] = {"S3DataSource": data}
    metadata = {**package.get("CustomerMetadataProperties", {}), SOURCE_KEY: source_arn, "promoted_from": from_env}
    if artifacts.compiled:
        metadata[MERGED_KEY] = f"s3://{target.bucket}/{artifacts.merged}"
        metadata.pop("merged_package", None)  # an ARN of the source's registry; SOURCE_KEY keeps the lineage
    request = {
        "ModelPackageGroupName": target.group,
        "ModelPackageDescription": f"Promoted from {source_arn} ({from_env}), approved there",
        "ModelApprovalStatus": APPROVED,
        "InferenceSpecification": {**package["InferenceSpecification"], "Containers": [serving]},
        "CustomerMetadataProperties": metadata,
    }
    statistics = package.get("ModelMetrics", {}).get("ModelQuality", {}).get("Statistics")
    if statistics:
        uri = _rebucket(statistics["S3Uri"], artifacts.bucket, target.bucket)
        request["ModelMetrics"] = {"ModelQuality": {"Statistics": {**statistics, "S3Uri": uri}}}
    return request


def register_copy(sagemaker, package: dict, artifacts: Artifacts, target: DataOutputs, from_env: str) -> str:
    """The version in the target's group, Approved, the source version's ARN in its metadata; once per source."""
    existing = registered_copy(sagemaker, target.group, package["ModelPackageArn"])
    if existing:
        return existing
    return sagemaker.create_model_package(**_copy_request(package, artifacts, target, from_env))["ModelPackageArn"]
