"""The AWS side of an environment: its session, its deployed Data stack's outputs, and denied calls."""

from __future__ import annotations

from pathlib import Path

from stacks.config import ConfigError, load_config
from tools.promote_model.model import DataOutputs, Environment, Refused

DATA_OUTPUTS = ("ArtifactBucketName", "ArtifactKeyArn", "ModelPackageGroupName")  # stacks/data/stack.py CfnOutputs
ACCESS_DENIED = {"AccessDenied", "AccessDeniedException", "AllAccessDisabled", "KMS.AccessDeniedException"}


def error_code(err: Exception) -> str:
    return getattr(err, "response", {}).get("Error", {}).get("Code", "")


def environment(name: str, config_dir: Path, profile: str | None, region: str | None, endpoint_url: str | None):
    """The environment's config (without its lock) and a session in its account and region."""
    import boto3

    try:
        config = load_config(name, config_dir, served=False)
    except ConfigError as err:
        raise Refused(str(err)) from None
    session = boto3.Session(profile_name=profile, region_name=region or config.region)
    return Environment(name, config, session, endpoint_url)


def data_outputs(env: Environment) -> DataOutputs:
    """The Data stack's outputs (DescribeStacks), or a refusal naming the stack that is not deployed."""
    from botocore.exceptions import ClientError

    stack = env.config.stack_id("Data")
    try:
        described = env.client("cloudformation").describe_stacks(StackName=stack)["Stacks"][0]
    except ClientError as err:
        raise Refused(
            f"environment {env.name}: its Data stack {stack} cannot be described ({error_code(err)}): deploy it "
            f"first (make deploy TARGET=aws ENV={env.name}) with these credentials"
        ) from None
    outputs = {o["OutputKey"]: o["OutputValue"] for o in described.get("Outputs", [])}
    missing = [name for name in DATA_OUTPUTS if name not in outputs]
    if missing:
        raise Refused(f"environment {env.name}: stack {stack} has no output {', '.join(missing)}: deploy it again")
    return DataOutputs(outputs["ArtifactBucketName"], outputs["ArtifactKeyArn"], outputs["ModelPackageGroupName"])
