#!/usr/bin/env python3
"""Promote an Approved model package version into an environment: copy, register, write its model lock.

    python tools/promote_model.py --to prod --version <package ARN>                # from prod's own registry
    python tools/promote_model.py --from dev --to staging --version <package ARN>  # between environments
    make promote FROM=dev TO=staging VERSION=<package ARN>
    python tools/promote_model.py --verify --to staging      # deploy.yml's pre-deploy step (make pre-deploy)

Everything is checked before anything is copied or written: the version is Approved; its recorded facts
(architecture, parameter count, context, heads, size), backend, image, listed instance types and compiled shape
fit the target's serving profile (the synth's own rules, stacks/config/served_model.py); its artifacts are in the
source environment's bucket and readable. Then, between environments: the merged (and compiled) model is copied
into the target's artifact bucket under the same keys, encrypted with the target's KMS key (SSE-KMS), and the
version is registered in the target's model package group as Approved (the source's approval carries over; the
review of the lock's diff is the target's approval), with the source ARN in its metadata. Last,
config/<to>.model.json is written (deterministic JSON): commit it and open the review.

The target's (and source's) bucket, key and group come from the deployed Data stacks' outputs (DescribeStacks).
Environments in separate accounts: --from-profile / --to-profile; the grants it needs are in docs/aws.md
(Promoting across accounts), and a missing one is refused with one line naming it.

`--verify` is the deploy workflow's check of a merged lock, read-only, before the diff: the version the lock names
is in the environment's own group, still Approved, and every object under the lock's prefixes is in the
environment's bucket; else the deploy stops with one line (a lock merged without its promotion's copy would
otherwise create an endpoint that cannot load its model).

Exit codes for a CI step: 0 promoted (stdout: `key=value` lines: model_package_arn, source_model_package_arn, lock,
lock_changed, copied_objects), 2 refused (one stderr line `promote_model: refused: ...`; nothing copied, registered
or written), 1 an AWS error the checks did not foresee (one stderr line).
"""

from __future__ import annotations

import argparse
import difflib
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from stacks.config import ConfigError, load_config  # noqa: E402
from stacks.config.model_lock import (  # noqa: E402
    compiled_from_metadata,
    facts_from_metadata,
    lock_path,
    lock_text,
    parse_lock,
)
from stacks.config.served_model import check_lock  # noqa: E402

DATA_OUTPUTS = ("ArtifactBucketName", "ArtifactKeyArn", "ModelPackageGroupName")  # stacks/data/stack.py CfnOutputs
APPROVED, REJECTED = "Approved", "Rejected"
LINEAGE_KEYS = ("training_job", "dataset", "dataset_marker_version_id", "code_asset_hash")
SOURCE_KEY, MERGED_KEY = "source_model_package_arn", "merged_model"
_S3_URI = re.compile(r"s3://(?P<bucket>[^/]+)/(?P<key>.+/)")
ACCESS_DENIED = {"AccessDenied", "AccessDeniedException", "AllAccessDisabled", "KMS.AccessDeniedException"}
GRANTS = "docs/aws.md#promoting-across-accounts"


class Refused(Exception):
    """The version cannot be promoted; the message is the one line that says why and what to do."""


@dataclass(frozen=True)
class DataOutputs:
    """An environment's deployed Data stack: artifact bucket, KMS key, model package group."""

    bucket: str
    key_arn: str
    group: str

    @property
    def account(self) -> str:
        return self.key_arn.split(":")[4]


@dataclass(frozen=True)
class Environment:
    name: str
    config: Any  # AppConfig without its lock (the profile a new version must fit)
    session: Any  # boto3.Session of the account it lives in
    endpoint_url: str | None

    def client(self, service: str):
        return self.session.client(service, endpoint_url=self.endpoint_url)


@dataclass(frozen=True)
class Artifacts:
    """A version's model prefixes in its bucket: the merged model and, for a compiled version, the compiled one."""

    bucket: str
    merged: str
    compiled: str | None

    @property
    def prefixes(self) -> list[str]:
        return [p for p in (self.merged, self.compiled) if p]


@dataclass(frozen=True)
class Promotion:
    model_package_arn: str
    source_model_package_arn: str | None
    lock_file: Path
    lock_changed: bool
    copied_objects: int
    diff: str


def _error_code(err: Exception) -> str:
    return getattr(err, "response", {}).get("Error", {}).get("Code", "")


def data_outputs(env: Environment) -> DataOutputs:
    """The Data stack's outputs (DescribeStacks), or a refusal naming the stack that is not deployed."""
    from botocore.exceptions import ClientError

    stack = env.config.stack_id("Data")
    try:
        described = env.client("cloudformation").describe_stacks(StackName=stack)["Stacks"][0]
    except ClientError as err:
        raise Refused(
            f"environment {env.name}: its Data stack {stack} cannot be described ({_error_code(err)}): deploy it "
            f"first (make deploy TARGET=aws ENV={env.name}) with these credentials"
        ) from None
    outputs = {o["OutputKey"]: o["OutputValue"] for o in described.get("Outputs", [])}
    missing = [name for name in DATA_OUTPUTS if name not in outputs]
    if missing:
        raise Refused(f"environment {env.name}: stack {stack} has no output {', '.join(missing)}: deploy it again")
    return DataOutputs(outputs["ArtifactBucketName"], outputs["ArtifactKeyArn"], outputs["ModelPackageGroupName"])


def describe_version(env: Environment, arn: str) -> dict:
    from botocore.exceptions import ClientError

    try:
        return env.client("sagemaker").describe_model_package(ModelPackageName=arn)
    except ClientError as err:
        if _error_code(err) in ACCESS_DENIED:
            raise Refused(
                f"{arn}: sagemaker:DescribeModelPackage denied to account of environment {env.name}: grant it with "
                f"the source group's resource policy ({GRANTS})"
            ) from None
        raise Refused(f"{arn}: no such model package version in environment {env.name}'s registry") from None


def check_approved(package: dict) -> None:
    arn, status = package["ModelPackageArn"], package.get("ModelApprovalStatus")
    if status == APPROVED:
        return
    metadata = package.get("CustomerMetadataProperties", {})
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


def _container(package: dict) -> dict:
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
    source = _container(package).get("ModelDataSource", {}).get("S3DataSource", {})
    if source.get("S3DataType") != "S3Prefix" or source.get("CompressionType") != "None":
        raise Refused(f"{arn}: ModelDataSource is not an uncompressed S3 prefix ({source})")
    prefix = _prefix_of(source.get("S3Uri", ""), arn, bucket, env.name)
    metadata = package.get("CustomerMetadataProperties", {})
    if MERGED_KEY in metadata:
        return Artifacts(bucket, _prefix_of(metadata[MERGED_KEY], arn, bucket, env.name), prefix)
    if "merged_package" in metadata:
        merged = describe_version(env, metadata["merged_package"])
        uri = _container(merged).get("ModelDataSource", {}).get("S3DataSource", {}).get("S3Uri", "")
        return Artifacts(bucket, _prefix_of(uri, arn, bucket, env.name), prefix)
    return Artifacts(bucket, prefix, None)


def _compiled_section(metadata: dict, arn: str) -> dict | None:
    compiled = compiled_from_metadata(metadata, arn)
    return None if compiled is None else {f: getattr(compiled, f) for f in compiled.__dataclass_fields__}


def candidate_lock(package: dict, artifacts: Artifacts, *, arn: str, source_arn: str | None, lock_source: str):
    """The lock this promotion writes (ModelLock), from the version's own records; ConfigError if one is bad."""
    metadata = package.get("CustomerMetadataProperties", {})
    container = _container(package)
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
            "image": container.get("Image", ""),
            "instance_types": package["InferenceSpecification"].get("SupportedRealtimeInferenceInstanceTypes", []),
        },
        "lineage": {
            **{k: metadata[k] for k in LINEAGE_KEYS if k in metadata},
            SOURCE_KEY: source_arn,
        },
    }
    return parse_lock(document, lock_source)


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
            if _error_code(err) not in ACCESS_DENIED:
                raise
            raise Refused(
                f"{arn}: {who} cannot read {where} ({_error_code(err)}): grant s3:ListBucket/s3:GetObject on the "
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


def register_copy(sagemaker, package: dict, artifacts: Artifacts, target: DataOutputs, from_env: str) -> str:
    """The version in the target's group: the same container and facts, its model in the target bucket, the
    source version's ARN in its metadata, Approved."""
    source_arn = package["ModelPackageArn"]
    existing = registered_copy(sagemaker, target.group, source_arn)
    if existing:
        return existing
    spec = package["InferenceSpecification"]
    container = dict(_container(package))
    data = dict(container["ModelDataSource"]["S3DataSource"])
    data["S3Uri"] = _rebucket(data["S3Uri"], artifacts.bucket, target.bucket)
    container["ModelDataSource"] = {"S3DataSource": data}
    metadata = {**package.get("CustomerMetadataProperties", {}), SOURCE_KEY: source_arn, "promoted_from": from_env}
    if artifacts.compiled:
        metadata[MERGED_KEY] = f"s3://{target.bucket}/{artifacts.merged}"
        metadata.pop("merged_package", None)  # an ARN of the source's registry; SOURCE_KEY keeps the lineage
    request = {
        "ModelPackageGroupName": target.group,
        "ModelPackageDescription": f"Promoted from {source_arn} ({from_env}), approved there",
        "ModelApprovalStatus": APPROVED,
        "InferenceSpecification": {**spec, "Containers": [container]},
        "CustomerMetadataProperties": metadata,
    }
    statistics = package.get("ModelMetrics", {}).get("ModelQuality", {}).get("Statistics")
    if statistics:
        uri = _rebucket(statistics["S3Uri"], artifacts.bucket, target.bucket)
        request["ModelMetrics"] = {"ModelQuality": {"Statistics": {**statistics, "S3Uri": uri}}}
    return sagemaker.create_model_package(**request)["ModelPackageArn"]


def _checked(lock, config, lock_source: str):
    try:
        check_lock(config, lock, lock_source)
    except ConfigError as err:
        raise Refused(str(err)) from None
    return lock


def promote(version: str, source: Environment, target: Environment, config_dir: Path) -> Promotion:
    """Check, copy (between environments), register, then write config/<target>.model.json."""
    lock_file = lock_path(config_dir, target.name)
    lock_source = f"{config_dir.name}/{lock_file.name}"
    between = source.name != target.name
    source_data = data_outputs(source)
    target_data = data_outputs(target) if between else source_data
    package = describe_version(source, version)
    check_approved(package)
    if package.get("ModelPackageGroupName") != source_data.group:
        raise Refused(
            f"{version}: it is in group {package.get('ModelPackageGroupName')}, not environment {source.name}'s "
            f"{source_data.group}: name the environment it was registered in with --from"
        )
    artifacts = artifacts_of(source, package, source_data.bucket)
    try:
        lock = candidate_lock(
            package, artifacts, arn=version, source_arn=version if between else None, lock_source=lock_source
        )
    except ConfigError as err:
        raise Refused(str(err)) from None
    _checked(lock, target.config, lock_source)
    reader = f"environment {target.name}'s account {target_data.account}" if between else f"environment {source.name}"
    s3 = target.client("s3")
    objects = readable_objects(s3, artifacts, version, reader)
    copied, arn = 0, version
    if between:
        copied = copy_objects(s3, objects, artifacts.bucket, target_data)
        arn = register_copy(target.client("sagemaker"), package, artifacts, target_data, source.name)
        lock = parse_lock({**_document(lock), "model_package_arn": arn}, lock_source)
    text = lock_text(lock)
    before = lock_file.read_text(encoding="utf-8") if lock_file.is_file() else ""
    diff = "".join(
        difflib.unified_diff(before.splitlines(True), text.splitlines(True), f"a/{lock_source}", f"b/{lock_source}")
    )
    if text != before:
        lock_file.write_text(text, encoding="utf-8")
    return Promotion(arn, version if between else None, lock_file, text != before, copied, diff)


def verify(env: Environment, config_dir: Path) -> str:
    """The committed lock's version and artifacts, as the environment's account sees them; the one line to print."""
    lock_file = lock_path(config_dir, env.name)
    if not lock_file.is_file():
        return f"{env.name}: no {lock_file.name}: nothing served"
    try:
        lock = load_config(env.name, config_dir).model  # the synth's checks of the lock against the profile
    except ConfigError as err:
        raise Refused(str(err)) from None
    data = data_outputs(env)
    package = describe_version(env, lock.model_package_arn)
    check_approved(package)
    arn = lock.model_package_arn
    if package.get("ModelPackageGroupName") != data.group:
        raise Refused(
            f"{arn}: {lock_file.name} names a version of group {package.get('ModelPackageGroupName')}, not "
            f"{env.name}'s {data.group}: promote it into {env.name} (make promote FROM=<env> TO={env.name})"
        )
    artifacts = Artifacts(data.bucket, lock.model_prefix, lock.compiled_prefix)
    objects = readable_objects(env.client("s3"), artifacts, arn, f"environment {env.name}")
    count = sum(len(keys) for keys in objects.values())
    return f"{env.name}: {arn} Approved, {count} objects under {', '.join(artifacts.prefixes)} in {data.bucket}"


def _document(lock) -> dict:
    import json

    return json.loads(lock_text(lock))


def environment(name: str, config_dir: Path, profile: str | None, region: str | None, endpoint_url: str | None):
    import boto3

    try:
        config = load_config(name, config_dir, served=False)
    except ConfigError as err:
        raise Refused(str(err)) from None
    session = boto3.Session(profile_name=profile, region_name=region or config.region)
    return Environment(name, config, session, endpoint_url)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--to", required=True, help="the environment to serve the version (config/<to>.yaml)")
    parser.add_argument("--from", dest="source", help="the environment whose registry holds it (default: --to)")
    parser.add_argument("--version", help="the model package version's ARN (Approved)")
    parser.add_argument("--verify", action="store_true", help="check --to's committed lock against AWS; write nothing")
    parser.add_argument("--config-dir", type=Path, default=ROOT / "config")
    parser.add_argument("--from-profile", help="AWS profile of the source environment's account")
    parser.add_argument("--to-profile", help="AWS profile of the target environment's account")
    parser.add_argument("--region", help="default: the environment's region, else the AWS configuration's")
    parser.add_argument("--endpoint-url", help="the emulator's URL (make deploy KEEP=1); default: AWS")
    args = parser.parse_args(argv)
    if not args.verify and not args.version:
        parser.error("--version is required (or --verify)")
    from botocore.exceptions import BotoCoreError, ClientError

    try:
        target = environment(args.to, args.config_dir, args.to_profile, args.region, args.endpoint_url)
        if args.verify:
            print(f"promote_model: verified {verify(target, args.config_dir)}")
            return 0
        source = target
        if args.source and args.source != args.to:
            source = environment(args.source, args.config_dir, args.from_profile, args.region, args.endpoint_url)
        done = promote(args.version, source, target, args.config_dir)
    except Refused as err:
        print(f"promote_model: refused: {err}", file=sys.stderr)
        return 2
    except (ClientError, BotoCoreError) as err:
        print(f"promote_model: error: {' '.join(str(err).split())}", file=sys.stderr)
        return 1
    print(done.diff or f"{done.lock_file.name}: unchanged", file=sys.stderr)
    print(f"model_package_arn={done.model_package_arn}")
    print(f"source_model_package_arn={done.source_model_package_arn or ''}")
    print(f"lock={done.lock_file.as_posix()}")
    print(f"lock_changed={'true' if done.lock_changed else 'false'}")
    print(f"copied_objects={done.copied_objects}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
