"""docs/aws.md's first deploy, every command of it as written, on the emulator, from an empty artifact bucket.

The guide's ```bash blocks under "First deploy" run in order (tests/local/emulator/guide_commands.py): the AWS
CLI commands as the boto3 calls the CLI makes, `aws s3 cp` and the make/npx commands through the actions below.
The guide speaks of dev; here its commands run against config/local.yaml (the emulator's profile: a tiny Llama),
so `llm-inf2-dev-` stack names and `ENV=dev`/`TO=dev` mean local, and the base model goes to local's
`base_model_key`; like dev it runs no benchmark job. The environment starts as a new account's does: no
config/local.model.json. Only train.py's step count is cut (FAST), so the run takes seconds.
"""

from __future__ import annotations

import json
import shlex
import sys
import time
from pathlib import Path

import pytest
import yaml

from local.emulator import LocalAws
from local.emulator import workflow_run as run
from tests.local.emulator.guide_commands import GuideRunner, command_lines, section
from tests.local.emulator.tiny_training import FAST, ROWS, recorded_base
from tests.synth import ROOT, synth, with_catalog
from tools import promote_model

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("first-deploy")]
ENV = "local"


def _new_account_file(folder: Path) -> Path:
    """config/local.yaml (no lock beside it: serving off, the shipped files' first state) and FAST training steps."""
    settings = yaml.safe_load((ROOT / "config" / f"{ENV}.yaml").read_text())
    settings["training"]["hyperparameters"].update(FAST)
    # The guide speaks of dev, which runs no benchmark: no task to stage before its first run (docs/training.md).
    settings["training"]["benchmark"]["tasks"] = []
    settings["training"]["quality_gate"]["max_benchmark_drop"] = None
    path = folder / f"{ENV}.yaml"
    path.write_text(yaml.safe_dump(settings, sort_keys=False))
    with_catalog(folder)
    return path


def _deploy(aws: LocalAws, folder: Path, out: Path) -> tuple[dict, list[str]]:
    """`npx cdk deploy --all -c env=local` on the emulator: synth the file as it is now, deploy every stack."""
    from stacks.config import load_config

    assembly = synth(load_config(ENV, folder), out)
    names = [s.stack_name for s in assembly.stacks]
    return aws.deploy(assembly.directory, names), names


def _settings(words: list[str]) -> dict[str, str]:
    """`make target NAME=value ...`: the NAME=value pairs."""
    return dict(word.split("=", 1) for word in words[2:])


def test_first_deploy_guide_runs_as_written_from_an_empty_bucket(tmp_path, monkeypatch, capsys):
    sys.path.insert(0, str(ROOT / "training_code" / "qlora"))
    from stacks.config import load_config

    started = time.monotonic()
    config_dir = tmp_path / "config"
    config_dir.mkdir()
    _new_account_file(config_dir)
    config = load_config(ENV, config_dir)
    guide_env = "dev"
    deployed: dict = {"names": [], "outputs": {}}
    base = recorded_base(tmp_path / "base")
    with LocalAws.start(time_scale=0.001, work_root=tmp_path / "jobs") as aws:
        for name, value in aws.credentials_environment().items():  # the guide's commands run as the operator
            monkeypatch.setenv(name, value)
        s3, sagemaker = aws.client("s3"), aws.client("sagemaker")

        def bootstrap(words):
            aws.bootstrap()

        def deploy(words):
            assert _settings(words) == {"TARGET": "aws", "ENV": guide_env}
            outputs, names = _deploy(aws, config_dir, tmp_path / f"cdk-{len(runner.ran)}")
            deployed.update(names=names, outputs=outputs)
            bucket = outputs[config.stack_id("Data")]["ArtifactBucketName"]
            if config.stack_id("Serving") not in names:  # the first deploy: serving off, nothing in the bucket
                assert s3.list_objects_v2(Bucket=bucket).get("KeyCount", 0) == 0
                assert sagemaker.list_endpoints()["Endpoints"] == []

        def diff(words):
            assert _settings(words) == {"ENV": guide_env}
            from stacks.config import load_config as reload

            names = [s.stack_name for s in synth(reload(ENV, config_dir), tmp_path / "cdk-diff").stacks]
            added = sorted(set(names) - set(deployed["names"]))
            assert added == [config.stack_id("Serving")], added  # the guide: "the Serving stack is added"
            return " ".join(added)

        def copy(words):
            source, target, *flags = words[3:]
            bucket, key = target.removeprefix("s3://").split("/", 1)
            if source == "./base-model/":
                assert flags == ["--recursive"]
                assert key == load_config("prod", ROOT / "config").training.base_model_key  # the guide's example
                for path in base.iterdir():
                    s3.upload_file(str(path), bucket, config.training.base_model_key + path.name)
            elif source == "/dev/null":
                s3.put_object(Bucket=bucket, Key=key, Body=b"")
            else:
                assert source.endswith(".jsonl"), source
                s3.put_object(Bucket=bucket, Key=key, Body=("\n".join(ROWS) + "\n").encode())

        def list_executions(words):
            machine = words[words.index("--state-machine-arn") + 1]
            (execution,) = run.wait_for_executions(aws, machine, 1)
            described = run.follow(aws, execution["executionArn"], say=lambda line: None, timeout_s=600)
            assert described["status"] == "SUCCEEDED", described.get("cause")
            answer = runner.aws_cli(words[1:])
            assert '"status": "SUCCEEDED"' in answer
            return answer

        def approve(words):
            # moto 5.2's UpdateModelPackage drops the metadata it is not given (AWS keeps it): hand it back
            arn = words[words.index("--model-package-arn") + 1]
            metadata = sagemaker.describe_model_package(ModelPackageName=arn)["CustomerMetadataProperties"]
            return runner.aws_cli([*words[1:], "--customer-metadata-properties", json.dumps(metadata)])

        def promote(words):
            settings = _settings(words)
            assert settings.keys() == {"TO", "VERSION"} and settings["TO"] == guide_env
            arguments = ["--to", ENV, "--version", settings["VERSION"], "--config-dir", str(config_dir)]
            code = promote_model.main([*arguments, "--endpoint-url", aws.endpoint_url, "--region", aws.region])
            printed = capsys.readouterr()
            assert code == 0, printed.err
            assert f"model_package_arn={settings['VERSION']}" in printed.out
            assert (config_dir / f"{ENV}.model.json").is_file()

        runner = GuideRunner(
            client=aws.client,
            actions={
                "npx cdk bootstrap": bootstrap,
                "make deploy": deploy,
                "make diff": diff,
                "make promote": promote,
                "aws s3 cp": copy,
                "aws stepfunctions list-executions": list_executions,
                "aws sagemaker update-model-package": approve,
            },
        )
        guide = section((ROOT / "docs" / "aws.md").read_text(), "First deploy")
        commands = list(command_lines(guide))
        stack_prefix = config.stack_id("Data").removesuffix("Data")
        for line in commands:
            answer = runner.run(line.replace(f"llm-inf2-{guide_env}-", stack_prefix))
            print(f"[{time.monotonic() - started:5.1f}s] {shlex.split(line)[:3]} -> {answer}", flush=True)

        assert runner.ran and len(runner.ran) == len(commands)
        version = ["--model-package-name", runner.variables["ARN"]]
        query = ["--query", "[ModelApprovalStatus, CustomerMetadataProperties]"]
        status, metadata = json.loads(runner.aws_cli(["sagemaker", "describe-model-package", *version, *query]))
        assert status == "Approved"
        assert metadata["architecture"] == "LlamaForCausalLM" and int(metadata["parameters"]) > 0
        endpoint = ["--endpoint-name", runner.variables["ENDPOINT"], "--query", "EndpointStatus", "--output", "text"]
        assert runner.aws_cli(["sagemaker", "describe-endpoint", *endpoint]) == "InService"
        # local scales to zero (serving.scale_to_zero): the served model is the inference component's
        (listed,) = sagemaker.list_inference_components(EndpointNameEquals=runner.variables["ENDPOINT"])[
            "InferenceComponents"
        ]
        component = sagemaker.describe_inference_component(InferenceComponentName=listed["InferenceComponentName"])
        model = sagemaker.describe_model(ModelName=component["Specification"]["ModelName"])
        model_uri = model["PrimaryContainer"]["Environment"]["OPTION_MODEL_ID"]
        bucket = runner.variables["BUCKET"]
        prefix = model_uri.removeprefix(f"s3://{bucket}/")
        assert model_uri.startswith(f"s3://{bucket}/models/") and prefix.endswith("/output/model/")
        served = {o["Key"] for o in s3.list_objects_v2(Bucket=bucket, Prefix=prefix)["Contents"]}
        assert {prefix + "config.json", prefix + "model.safetensors", prefix + "model_facts.json"} <= served
        parameter = deployed["outputs"][config.stack_id("Training")]["ModelParameterName"]
        assert aws.client("ssm").get_parameter(Name=parameter)["Parameter"]["Value"] == model_uri
