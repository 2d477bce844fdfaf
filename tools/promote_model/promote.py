"""Promotion and verification: every check before anything is copied, registered or written."""

from __future__ import annotations

from pathlib import Path

from stacks.config import ConfigError, load_config
from stacks.config.model_lock import lock_path
from tools.promote_model.aws import data_outputs
from tools.promote_model.lock import fitting_lock, with_arn, write_lock
from tools.promote_model.model import Artifacts, DataOutputs, Environment, Promotion, Refused
from tools.promote_model.objects import copy_objects, readable_objects
from tools.promote_model.registry import artifacts_of, check_approved, describe_version, register_copy


def _approved_in_group(env: Environment, version: str, data: DataOutputs) -> dict:
    """The version, Approved, in the group of the environment named as its source."""
    package = describe_version(env, version)
    check_approved(package)
    if package.get("ModelPackageGroupName") != data.group:
        raise Refused(
            f"{version}: it is in group {package.get('ModelPackageGroupName')}, not environment {env.name}'s "
            f"{data.group}: name the environment it was registered in with --from"
        )
    return package


def promote(version: str, source: Environment, target: Environment, config_dir: Path) -> Promotion:
    """Check, copy (between environments), register, then write config/<target>.model.json."""
    lock_file = lock_path(config_dir, target.name)
    lock_source = f"{config_dir.name}/{lock_file.name}"
    between = source.name != target.name
    source_data = data_outputs(source)
    target_data = data_outputs(target) if between else source_data
    package = _approved_in_group(source, version, source_data)
    artifacts = artifacts_of(source, package, source_data.bucket)
    source_arn = version if between else None
    lock = fitting_lock(package, artifacts, target.config, arn=version, source_arn=source_arn, lock_source=lock_source)
    reader = f"environment {target.name}'s account {target_data.account}" if between else f"environment {source.name}"
    s3 = target.client("s3")
    objects = readable_objects(s3, artifacts, version, reader)
    copied, arn = 0, version
    if between:
        copied = copy_objects(s3, objects, artifacts.bucket, target_data)
        arn = register_copy(target.client("sagemaker"), package, artifacts, target_data, source.name)
        lock = with_arn(lock, arn, lock_source)
    changed, diff = write_lock(lock, lock_file, lock_source)
    return Promotion(arn, source_arn, lock_file, changed, copied, diff)


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
