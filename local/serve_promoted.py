"""After a run the gate passed: the registry's path to an endpoint on the emulator, the way docs/aws.md goes.

A person approves the version (here the pipeline does, and says so). tools/promote_model/ then checks it against
the environment's serving profile and writes its lock. The lock goes into a copy of config/, so `make pipeline`
leaves the repository's files as they are. The app is synthesized with that folder and deployed again, and the
Serving stack's endpoint comes up InService (an emulated resource; the model itself is served by the local servers).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from local.deploy import deploy
from local.emulator import LocalAws
from stacks.config import load_config

ROOT = Path(__file__).resolve().parents[1]


def approve(aws: LocalAws, arn: str) -> None:
    """UpdateModelPackage to Approved. moto 5.2 drops metadata the call does not carry (AWS keeps it): send it."""
    sagemaker = aws.client("sagemaker")
    metadata = sagemaker.describe_model_package(ModelPackageName=arn).get("CustomerMetadataProperties", {})
    sagemaker.update_model_package(
        ModelPackageArn=arn, ModelApprovalStatus="Approved", CustomerMetadataProperties=metadata
    )


def promote(aws: LocalAws, *, env_name: str, arn: str, config_dir: Path, source: Path) -> None:
    """`make promote TO=<env> VERSION=<arn>` against the emulator, into `config_dir` (a copy of `source`)."""
    shutil.rmtree(config_dir, ignore_errors=True)
    shutil.copytree(source, config_dir, ignore=shutil.ignore_patterns("*.model.json"))
    env = {**os.environ, **aws.credentials_environment()}  # the operator's keys: a person runs make promote
    argv = ["--to", env_name, "--version", arn, "--config-dir", str(config_dir)]
    argv += ["--endpoint-url", aws.endpoint_url, "--region", aws.region]
    done = subprocess.run([sys.executable, "-m", "tools.promote_model", *argv], cwd=ROOT, env=env, check=False)
    if done.returncode != 0:
        raise SystemExit(f"pipeline: the promotion of {arn} was refused (the line above says why)")


def synth(env_name: str, config_dir: Path, out: Path) -> None:
    """`make synth` with the promoted lock: the CDK CLI runs app.py on `config_dir`."""
    shutil.rmtree(out, ignore_errors=True)
    context = ["-c", f"env={env_name}", "-c", f"config_dir={config_dir}"]
    command = ["npx", "cdk", "synth", "--quiet", *context, "--output", str(out), "--app", f"{sys.executable} app.py"]
    subprocess.run(command, cwd=ROOT, check=True, stdout=subprocess.DEVNULL)


def promote_and_deploy(
    aws: LocalAws, *, env_name: str, arn: str, work: Path, say: Callable[[str], None], source: Path = ROOT / "config"
) -> dict:
    """Approve, promote (into a copy of `source`, the environment's config folder), synthesize, deploy; the
    endpoint's status as SageMaker describes it."""
    approve(aws, arn)
    say(f"approved {arn} (a person's decision in the registry; the pipeline takes it for you here)")
    config_dir = work / "config"
    promote(aws, env_name=env_name, arn=arn, config_dir=config_dir, source=source)
    lock = config_dir / f"{env_name}.model.json"
    say(f"promoted: tools/promote_model/ wrote {lock} (commit it for review; config/ is left as it is)")
    out = work / "cdk.out.served"
    synth(env_name, config_dir, out)
    if deploy(out, None, aws) != 0:
        raise SystemExit("pipeline: the deploy with the promoted version failed (the lines above say where)")
    serving = load_config(env_name, config_dir).stack_id("Serving")
    endpoint = aws.outputs(serving)["EndpointName"]
    status = aws.client("sagemaker").describe_endpoint(EndpointName=endpoint)["EndpointStatus"]
    say(f"deployed {serving}: endpoint {endpoint} {status}, serving {arn}")
    return {"lock": str(lock), "endpoint": endpoint, "endpoint_status": status}
