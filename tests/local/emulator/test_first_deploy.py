"""docs/aws.md's first deploy, step by step on the emulator, from an empty artifact bucket.

The environment is config/local.yaml as a new account's folder starts: no config/local.model.json. Steps, in
the guide's order: bootstrap; deploy every stack (no Serving stack, no endpoint); upload a base model and a
dataset (its `_READY` marker starts the Training workflow by the bucket's rule); read the prefix the workflow
recorded in SSM; approve the version it registered (a person's decision) and promote it (tools/promote_model.py
writes config/local.model.json); deploy again; the endpoint is InService and its model points at objects that
exist. Only train.py's step count is cut (FAST), so the run takes seconds.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest
import yaml

from local.emulator import LocalAws
from local.emulator import workflow_run as run
from tests.local.emulator.tiny_training import FAST, ROWS
from tests.synth import ROOT, synth
from tools import promote_model

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("first-deploy")]
ENV = "local"


def _new_account_file(folder: Path) -> Path:
    """config/local.yaml (no lock beside it: serving off, the shipped files' first state) and FAST training steps."""
    settings = yaml.safe_load((ROOT / "config" / f"{ENV}.yaml").read_text())
    settings["training"]["hyperparameters"].update(FAST)
    path = folder / f"{ENV}.yaml"
    path.write_text(yaml.safe_dump(settings, sort_keys=False))
    return path


def _deploy(aws: LocalAws, folder: Path, out: Path) -> tuple[dict, list[str]]:
    """`npx cdk deploy --all -c env=local` on the emulator: synth the file as it is now, deploy every stack."""
    from stacks.config import load_config

    assembly = synth(load_config(ENV, folder), out)
    names = [s.stack_name for s in assembly.stacks]
    return aws.deploy(assembly.directory, names), names


def test_first_deploy_guide_from_an_empty_bucket(tmp_path, monkeypatch, capsys):
    sys.path.insert(0, str(ROOT / "training_code" / "qlora"))
    from finetune.tiny import build_tiny_llama

    from stacks.config import load_config

    steps: list[str] = []
    started = time.monotonic()

    def step(line: str) -> None:
        steps.append(f"[{time.monotonic() - started:5.1f}s] {line}")
        print(steps[-1], flush=True)

    config_dir = tmp_path / "config"
    config_dir.mkdir()
    _new_account_file(config_dir)
    config = load_config(ENV, config_dir)
    with LocalAws.start(time_scale=0.001, work_root=tmp_path / "jobs") as aws:
        aws.bootstrap()
        step("1 bootstrap: cdk bootstrap (version parameter, assets bucket)")

        outputs, names = _deploy(aws, config_dir, tmp_path / "cdk-1")
        assert config.stack_id("Serving") not in names
        bucket = outputs[config.stack_id("Data")]["ArtifactBucketName"]
        s3, sagemaker = aws.client("s3"), aws.client("sagemaker")
        assert s3.list_objects_v2(Bucket=bucket).get("KeyCount", 0) == 0
        assert sagemaker.list_endpoints()["Endpoints"] == []
        step(f"2 deploy, serving off: {', '.join(names)}; bucket empty, no endpoint")

        base = build_tiny_llama(tmp_path / "base", ROWS, vocab_size=300)
        for path in base.iterdir():
            s3.upload_file(str(path), bucket, config.training.base_model_key + path.name)
        machine = outputs[config.stack_id("Training")]["StateMachineArn"]
        for i in range(2):
            s3.put_object(
                Bucket=bucket, Key=f"datasets/first/train-{i}.jsonl", Body=("\n".join(ROWS[i::2]) + "\n").encode()
            )
        s3.put_object(Bucket=bucket, Key="datasets/first/_READY", Body=b"")
        step(f"3 upload: base model -> {config.training.base_model_key}, dataset -> datasets/first/ + _READY")

        executions = run.wait_for_executions(aws, machine, 1)
        described = run.follow(aws, executions[0]["executionArn"], say=lambda line: None, timeout_s=600)
        assert described["status"] == "SUCCEEDED", described.get("cause")
        parameter = run.output_of(described)["model_parameter"]
        step(f"4 Training workflow (started by the _READY rule): {described['status']}")

        recorded = aws.client("ssm").get_parameter(Name=parameter)["Parameter"]["Value"]
        prefix = recorded.removeprefix(f"s3://{bucket}/")
        assert recorded.startswith(f"s3://{bucket}/models/") and prefix.endswith("/output/model/")
        step(f"5 recorded prefix: aws ssm get-parameter --name {parameter} -> {recorded}")

        group = outputs[config.stack_id("Data")]["ModelPackageGroupName"]
        (summary,) = sagemaker.list_model_packages(ModelPackageGroupName=group)["ModelPackageSummaryList"]
        version = summary["ModelPackageArn"]
        metadata = sagemaker.describe_model_package(ModelPackageName=version)["CustomerMetadataProperties"]
        # a person approves it; moto 5.2's UpdateModelPackage drops the metadata it is not given (AWS keeps it)
        sagemaker.update_model_package(
            ModelPackageArn=version, ModelApprovalStatus="Approved", CustomerMetadataProperties=metadata
        )
        for name, value in (("AWS_ACCESS_KEY_ID", "emulated"), ("AWS_SECRET_ACCESS_KEY", "emulated")):
            monkeypatch.setenv(name, value)
        promoted = promote_model.main(
            ["--to", ENV, "--version", version, "--config-dir", str(config_dir), "--endpoint-url", aws.endpoint_url]
            + ["--region", aws.region]
        )
        assert promoted == 0, capsys.readouterr().err
        assert f"model_package_arn={version}" in capsys.readouterr().out
        outputs, names = _deploy(aws, config_dir, tmp_path / "cdk-2")
        serving = config.stack_id("Serving")
        assert serving in names
        step(f"6 approved {version}; make promote TO={ENV}: config/{ENV}.model.json; deploy again: {serving} created")

        endpoint = outputs[serving]["EndpointName"]
        described_endpoint = sagemaker.describe_endpoint(EndpointName=endpoint)
        assert described_endpoint["EndpointStatus"] == "InService"
        variant = sagemaker.describe_endpoint_config(EndpointConfigName=described_endpoint["EndpointConfigName"])[
            "ProductionVariants"
        ][0]
        model = sagemaker.describe_model(ModelName=variant["ModelName"])
        model_uri = model["PrimaryContainer"]["Environment"]["OPTION_MODEL_ID"]
        assert model_uri == recorded
        served = {o["Key"] for o in s3.list_objects_v2(Bucket=bucket, Prefix=prefix)["Contents"]}
        assert {prefix + "config.json", prefix + "model.safetensors"} <= served
        step(f"7 endpoint {endpoint}: InService, OPTION_MODEL_ID {model_uri} ({len(served)} objects there)")
    step("done")
