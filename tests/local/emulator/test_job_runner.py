"""The local job runner, which runs each job through the SageMaker training toolkit (sagemaker-training, with
sagemaker-pytorch-training's framework module): what the entry point sees, what lands in S3, how a job ends.
Expected values are the toolkit's documented contract (ENVIRONMENT_VARIABLES.md, mapping.to_cmd_args) and
SageMaker's (DescribeTrainingJob's FailureReason, MaxRuntimeExceeded)."""

from __future__ import annotations

import functools
import hashlib
import io
import json
import re
import tarfile
import tempfile
from pathlib import Path

import pytest

from local.emulator import LocalAws
from local.emulator.faults import Drill, FaultPlan
from tests.synth import ROOT

pytestmark = pytest.mark.slow

BUCKET = "runner-contract"

# An entry point that records what it was given, prints metrics and writes a model, like train.py does.
ENTRY = r"""
import json, os, sys
from pathlib import Path
seen = {"argv": sys.argv[1:], "env": {k: v for k, v in os.environ.items() if k.startswith(("SM_", "TRAINING_JOB"))},
        "cwd_files": sorted(os.listdir(".")), "channel": sorted(os.listdir(os.environ["SM_CHANNEL_TRAINING"])),
        "config": sorted(os.listdir(os.environ["SM_INPUT_CONFIG_DIR"])),
        "checkpoint_from_s3": sorted(os.listdir(Path(os.environ["SM_MODEL_DIR"]).parent / "checkpoints"))}
Path(os.environ["SM_MODEL_DIR"], "seen.json").write_text(json.dumps(seen))
Path(os.environ["SM_OUTPUT_DATA_DIR"], "report.txt").write_text("report")
(Path(os.environ["SM_MODEL_DIR"]).parent / "checkpoints" / "step-2").write_text("saved")
print("epoch=1; train_loss=0.50; num_parameters=108311810")
print("epoch=2; train_loss=0.25; num_parameters=108311810")
if os.environ.get("SM_HP_FAIL") == "1":
    Path(os.environ["SM_OUTPUT_DIR"], "failure").write_text("ValueError: the data has no text column")
    sys.exit(3)
if os.environ.get("SM_HP_FAIL") == "2":  # a crash that leaves the failure file to the toolkit
    raise RuntimeError("x" * 2000)
if os.environ.get("SM_HP_SLEEP"):
    import time
    time.sleep(float(os.environ["SM_HP_SLEEP"]))
"""
# The training code's start-up read of the hub token (finetune/hub_token.py, shipped beside it), then what the
# process holds: a digest of HF_TOKEN, never the token, so nothing the job writes can leak it.
PROBE = r"""
import hashlib, json, os
from pathlib import Path
import hub_token
held_before = hub_token.TOKEN_VARIABLE in os.environ
arn = hub_token.read_hub_token()
token = os.environ.get(hub_token.TOKEN_VARIABLE, "")
probe = {"arn": arn, "held_before": held_before, "sha256": hashlib.sha256(token.encode()).hexdigest()}
Path(os.environ["SM_MODEL_DIR"], "probe.json").write_text(json.dumps(probe))
"""
HUB_TOKEN_CODE = ROOT / "training_code" / "qlora" / "finetune" / "hub_token.py"
FAKE_TOKEN = "hf_" + "Zq7" * 12  # the shape of a hub token; no hub would take it
# A PyTorch framework image: the runner starts the toolkit with its module, sagemaker_pytorch_container.training.
PYTORCH_IMAGE = (
    "763104351884.dkr.ecr.us-east-1.amazonaws.com/huggingface-pytorch-training:"
    "2.1.0-transformers4.36.0-gpu-py310-cu121-ubuntu20.04"
)
METRICS = [{"Name": n, "Regex": rf"{n}=([0-9.eE+-]+)"} for n in ("epoch", "train_loss", "num_parameters")]


# requirements.txt files the image (.venv here) cannot satisfy: a pin it does not have, a package it lacks.
UNMET_REQUIREMENTS = {"wrong-pin": "transformers==0.0.1\n", "not-installed": "a-package-no-image-has==1.0\n"}


def _code_tarball(requirements: str | None = None, files: dict[str, str] | None = None) -> bytes:
    files = files or {"entry.py": ENTRY, **({"requirements.txt": requirements} if requirements is not None else {})}
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as archive:
        for name, text in files.items():
            data = text.encode()
            info = tarfile.TarInfo(name)
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


@pytest.fixture(scope="module")
def aws(tmp_path_factory):
    with LocalAws.start(work_root=tmp_path_factory.mktemp("jobs")) as emulator:
        s3 = emulator.client("s3")
        s3.create_bucket(Bucket=BUCKET)
        s3.put_object(Bucket=BUCKET, Key="code/sourcedir.tar.gz", Body=_code_tarball())
        for name, requirements in UNMET_REQUIREMENTS.items():
            s3.put_object(Bucket=BUCKET, Key=f"code/{name}.tar.gz", Body=_code_tarball(requirements))
        for name in ("a.jsonl", "b.jsonl"):
            s3.put_object(Bucket=BUCKET, Key=f"datasets/set/{name}", Body=b'{"text": "x"}\n')
        s3.put_object(Bucket=BUCKET, Key="checkpoints/run/step-1", Body=b"earlier")
        probe = {"entry.py": PROBE, "hub_token.py": HUB_TOKEN_CODE.read_text()}
        s3.put_object(Bucket=BUCKET, Key="code/probe.tar.gz", Body=_code_tarball(files=probe))
        yield emulator


def request(
    name: str,
    *,
    compression: str = "NONE",
    fail: str = "",
    data: str = "datasets/set/",
    extra: dict | None = None,
    max_runtime: int = 120,
    code: str = "sourcedir",
) -> dict:
    hyperparameters = {
        "epochs": "2",
        "merge": "true",
        "model_id": "org/model",
        "lora_r": "16",
        "sagemaker_program": '"entry.py"',
        **(extra or {}),
        "sagemaker_submit_directory": f'"s3://{BUCKET}/code/{code}.tar.gz"',
    }
    if fail:
        hyperparameters["fail"] = fail
    return {
        "TrainingJobName": name,
        "HyperParameters": hyperparameters,
        "AlgorithmSpecification": {
            "TrainingImage": PYTORCH_IMAGE,
            "TrainingInputMode": "File",
            "MetricDefinitions": METRICS,
        },
        "InputDataConfig": [
            {
                "ChannelName": "training",
                "DataSource": {
                    "S3DataSource": {
                        "S3DataType": "S3Prefix",
                        "S3Uri": f"s3://{BUCKET}/{data}",
                        "S3DataDistributionType": "FullyReplicated",
                    }
                },
            }
        ],
        "OutputDataConfig": {"S3OutputPath": f"s3://{BUCKET}/models/", "CompressionType": compression},
        "ResourceConfig": {"InstanceType": "ml.g5.2xlarge", "InstanceCount": 1, "VolumeSizeInGB": 30},
        "StoppingCondition": {"MaxRuntimeInSeconds": max_runtime},
        "CheckpointConfig": {"S3Uri": f"s3://{BUCKET}/checkpoints/run/", "LocalPath": "/opt/ml/checkpoints"},
    }


def _object(aws, key: str) -> bytes:
    return aws.client("s3").get_object(Bucket=BUCKET, Key=key)["Body"].read()


@pytest.fixture(scope="module")
def completed(aws):
    """One plain job that completes: what its entry point saw and what it reported."""
    return aws.job_runner.run(request("contract-1"), job_arn="arn:aws:sagemaker:::training-job/contract-1")


def test_entry_point_sees_the_toolkits_contract(aws, completed):
    outcome = completed
    assert outcome.status == "Completed", outcome.failure_reason
    seen = json.loads(_object(aws, "models/contract-1/output/model/seen.json"))
    # The toolkit's command line: sorted, sagemaker_* left out, JSON-decoded ("true" -> True).
    assert seen["argv"] == ["--epochs", "2", "--lora_r", "16", "--merge", "True", "--model_id", "org/model"]
    env = seen["env"]
    assert json.loads(env["SM_HPS"]) == {"epochs": 2, "lora_r": 16, "merge": True, "model_id": "org/model"}
    assert json.loads(env["SM_CHANNELS"]) == ["training"] and env["SM_HP_MERGE"] == "true"
    assert env["SM_MODEL_DIR"].endswith("/contract-1/model") and env["SM_CHANNEL_TRAINING"].endswith(
        "/contract-1/input/data/training"
    )
    assert env["SM_USER_ENTRY_POINT"] == "entry.py" and env["TRAINING_JOB_NAME"] == "contract-1"
    assert env["SM_MODULE_DIR"] == f"s3://{BUCKET}/code/sourcedir.tar.gz"  # the toolkit downloaded it
    assert env["SM_CURRENT_INSTANCE_TYPE"] == "ml.g5.2xlarge"
    assert seen["channel"] == ["a.jsonl", "b.jsonl"] and "entry.py" in seen["cwd_files"]
    assert seen["config"] == ["hyperparameters.json", "inputdataconfig.json", "resourceconfig.json"]
    assert seen["checkpoint_from_s3"] == ["step-1"]  # CheckpointConfig is downloaded first, so a retry resumes
    assert _object(aws, "checkpoints/run/step-2") == b"saved"  # and synced back


def test_the_jobs_environment_reaches_the_script_and_its_hub_token_stays_in_the_process(aws):
    """CreateTrainingJob's Environment is the container's, as in SageMaker: the training code finds the secret's
    ARN there, reads the secret from the emulator's Secrets Manager and holds the token as HF_TOKEN; the token is
    in neither the request nor the job's log."""
    arn = aws.client("secretsmanager").create_secret(Name="hub-token", SecretString=FAKE_TOKEN)["ARN"]
    job = request("hub-token-1", code="probe")
    job["Environment"] = {"HF_TOKEN_SECRET_ARN": arn}
    outcome = aws.job_runner.run(job, job_arn="arn")
    assert outcome.status == "Completed", outcome.failure_reason
    probe = json.loads(_object(aws, "models/hub-token-1/output/model/probe.json"))
    assert probe == {"arn": arn, "held_before": False, "sha256": hashlib.sha256(FAKE_TOKEN.encode()).hexdigest()}
    log = (aws.job_runner.work_root / "hub-token-1" / "job.log").read_text()
    assert "entry.py" in log  # the toolkit's lines: the job's log, read where the runner writes it
    assert FAKE_TOKEN not in log and FAKE_TOKEN not in json.dumps(aws.job_runner.requests[-1])


def test_metrics_are_the_last_values_as_float32(completed):
    outcome = completed
    # 108,311,810 is not a float32: SageMaker reports 108,311,808, as this does.
    assert outcome.metrics == {"epoch": 2.0, "train_loss": 0.25, "num_parameters": 108311808.0}


def test_gzip_output_is_a_model_tarball_and_output_data_is_packed(aws):
    outcome = aws.job_runner.run(request("gzip-1", compression="GZIP"), job_arn="arn")
    assert outcome.model_artifacts == f"s3://{BUCKET}/models/gzip-1/output/model.tar.gz"
    with tarfile.open(fileobj=io.BytesIO(_object(aws, "models/gzip-1/output/model.tar.gz"))) as archive:
        assert archive.getnames() == ["seen.json"]
    with tarfile.open(fileobj=io.BytesIO(_object(aws, "models/gzip-1/output/output.tar.gz"))) as archive:
        assert archive.getnames() == ["report.txt"]


def test_the_command_line_is_the_toolkits_mapping(aws):
    """One-letter keys, dicts, lists and nulls as `to_cmd_args` maps them; AMT's key left to the toolkit."""
    extra = {
        "k": "3",
        "opts": '{"a": 1, "b": "x"}',
        "layers": "[1, 2]",
        "none": "null",
        "_tuning_objective_metric": "validation-error",
    }
    outcome = aws.job_runner.run(request("argv-1", extra=extra), job_arn="arn")
    assert outcome.status == "Completed", outcome.failure_reason
    argv = json.loads(_object(aws, "models/argv-1/output/model/seen.json"))["argv"]
    assert argv == [
        "--epochs",
        "2",
        "-k",
        "3",
        "--layers",
        "[1, 2]",
        "--lora_r",
        "16",
        "--merge",
        "True",
        "--model_id",
        "org/model",
        "--none",
        "",
        "--opts",
        "a=1,b=x",
    ]


def test_a_failing_script_gives_sagemakers_failure_reason(aws):
    """FailureReason: `AlgorithmError: <failure file, first 1,024 characters>, exit code: N`; the script's own
    failure file is kept (the toolkit writes one only when there is none), the toolkit exits 1."""
    outcome = aws.job_runner.run(request("fail-1", fail="1"), job_arn="arn")
    assert outcome.status == "Failed" and outcome.model_artifacts is None
    assert outcome.failure_reason == "AlgorithmError: ValueError: the data has no text column, exit code: 1"
    crashed = aws.job_runner.run(request("fail-2", fail="2"), job_arn="arn")
    detail = crashed.failure_reason.removeprefix("AlgorithmError: ").removesuffix(", exit code: 1")
    assert detail.startswith("ExecuteUserScriptError:\nExitCode 1\nErrorMessage ") and len(detail) == 1024
    # The toolkit reads stderr in fixed-size chunks and strips " :" around each piece, so a line that straddles
    # two reads comes back as "RuntimeError\n xxx..." (as it would in SageMaker): the name, then the message.
    assert re.search(r"RuntimeError(: |\n )?x{20}", detail), detail[:300]


@pytest.mark.parametrize("code", sorted(UNMET_REQUIREMENTS))
def test_requirements_the_image_cannot_meet_fail_the_job_and_leave_the_image_alone(aws, code):
    """The toolkit pip-installs requirements.txt; here only from what .venv (the image) has, so an unmet pin or a
    missing package is the toolkit's InstallRequirementsError, and transformers is still the version installed."""
    from importlib.metadata import version

    installed = version("transformers")
    outcome = aws.job_runner.run(request(f"req-{code}", code=code), job_arn="arn")
    assert outcome.status == "Failed", outcome
    assert outcome.failure_reason.startswith("AlgorithmError: InstallRequirementsError:"), outcome.failure_reason
    assert outcome.failure_reason.endswith(", exit code: 1")
    assert version("transformers") == installed


def test_a_job_past_max_runtime_is_stopped_as_sagemaker_stops_it(aws):
    """Stopped, SecondaryStatus MaxRuntimeExceeded, no FailureReason; what the job saved is uploaded."""
    outcome = aws.job_runner.run(request("slow-1", extra={"sleep": "60"}, max_runtime=8), job_arn="arn")
    assert (outcome.status, outcome.secondary_status, outcome.failure_reason) == ("Stopped", "MaxRuntimeExceeded", None)
    assert outcome.model_artifacts == f"s3://{BUCKET}/models/slow-1/output/model/"
    assert (outcome.ended - outcome.started).total_seconds() < 40


def test_missing_data_and_container_jobs_fail_with_a_reason(aws):
    missing = aws.job_runner.run(request("missing-1", data="datasets/none/"), job_arn="arn")
    assert missing.status == "Failed" and "No S3 objects found under S3 URL" in missing.failure_reason
    compile_job = request("compile-1")
    compile_job["HyperParameters"] = {}
    compile_job["AlgorithmSpecification"]["ContainerEntrypoint"] = ["bash", "-c", "optimum-cli export neuron"]
    outcome = aws.job_runner.run(compile_job, job_arn="arn")
    assert outcome.status == "Failed" and "runs only on AWS" in outcome.failure_reason
    assert "optimum-cli export neuron" in outcome.failure_reason


def test_drills_hit_the_named_try_only(aws):
    aws.job_runner.faults = FaultPlan([Drill("capacity", job_contains="drill-", tries=(1,))])
    try:
        first = aws.job_runner.run(request("drill-1"), job_arn="arn")
        second = aws.job_runner.run(request("drill-2"), job_arn="arn")
    finally:
        aws.job_runner.faults = FaultPlan()
    assert first.status == "Failed" and first.failure_reason.startswith("CapacityError:")
    assert second.status == "Completed"
    with pytest.raises(ValueError, match="drill kind"):
        Drill("flaky")


def test_what_is_not_emulated_fails_with_one_line(aws):
    from local.emulator import tuning

    manifest = request("manifest-1")
    manifest["InputDataConfig"][0]["DataSource"]["S3DataSource"]["S3DataType"] = "ManifestFile"
    outcome = aws.job_runner.run(manifest, job_arn="arn")
    assert outcome.status == "Failed"
    assert outcome.failure_reason == "ClientError: channel training: S3DataType ManifestFile is not emulated"
    bayesian = {"HyperParameterTuningJobName": "t", "HyperParameterTuningJobConfig": {"Strategy": "Bayesian"}}
    with pytest.raises(ValueError, match=r"^tuning strategy Bayesian is not emulated \(Random is\)$"):
        tuning.plan(bayesian, max_trials=3)


@functools.cache
def _dev_partition_parameters() -> str:
    """dev's CompileForNeuron Parameters as JSON: one synth for the module's partition jobs."""
    from tests.stacks.training.test_training_stack import definition
    from tests.synth import synth_env, templates

    with tempfile.TemporaryDirectory() as out:
        template = templates(synth_env("dev", Path(out)))["Training"]
    return json.dumps(definition(template)["States"]["CompileForNeuron"]["Parameters"])


def _dev_partition_request(name: str) -> dict:
    """dev's CompileForNeuron request as the state machine sends it (the template's Parameters, run-time fields
    filled), its model channel and output in this module's bucket."""
    params = json.loads(_dev_partition_parameters())
    request = {k: v for k, v in params.items() if not k.endswith(".$")}
    request["TrainingJobName"] = name
    request["RoleArn"] = "arn:aws:iam::123456789012:role/compile"
    request["AlgorithmSpecification"] = {**params["AlgorithmSpecification"], "TrainingImage": LMI_IMAGE}
    (channel,) = params["InputDataConfig"]
    source = {k: v for k, v in channel["DataSource"]["S3DataSource"].items() if not k.endswith(".$")}
    request["InputDataConfig"] = [
        {**channel, "DataSource": {"S3DataSource": {**source, "S3Uri": f"s3://{BUCKET}/tiny/"}}}
    ]
    request["OutputDataConfig"] = {"S3OutputPath": f"s3://{BUCKET}/models/", "CompressionType": "NONE"}
    return request


LMI_IMAGE = "763104351884.dkr.ecr.us-east-1.amazonaws.com/djl-inference:0.30.0-neuronx-sdk2.20.1"


def _compile_role(aws) -> None:
    """The role the request names (IAM is enforced): SageMaker may assume it and it may use this module's bucket."""
    iam = aws.client("iam")
    if any(r["RoleName"] == "compile" for r in iam.list_roles()["Roles"]):
        return
    trust = {"Effect": "Allow", "Principal": {"Service": "sagemaker.amazonaws.com"}, "Action": "sts:AssumeRole"}
    iam.create_role(
        RoleName="compile", AssumeRolePolicyDocument=json.dumps({"Version": "2012-10-17", "Statement": [trust]})
    )
    grant = {"Effect": "Allow", "Action": "s3:*", "Resource": [f"arn:aws:s3:::{BUCKET}", f"arn:aws:s3:::{BUCKET}/*"]}
    iam.put_role_policy(
        RoleName="compile",
        PolicyName="bucket",
        PolicyDocument=json.dumps({"Version": "2012-10-17", "Statement": [grant]}),
    )


def _upload_model(aws, heads: int) -> None:
    _compile_role(aws)
    s3 = aws.client("s3")
    config = {"model_type": "llama", "architectures": ["LlamaForCausalLM"], "num_attention_heads": heads}
    for name, body in (
        ("config.json", json.dumps(config)),
        ("generation_config.json", '{"do_sample": true}'),
        ("tokenizer.json", "{}"),
        ("model.safetensors", "weights"),
    ):
        s3.put_object(Bucket=BUCKET, Key=f"tiny/{name}", Body=body.encode())


def test_the_lmi_partition_runs_with_its_stand_in_and_leaves_the_compiled_layout(aws):
    """dev's own request: its script, arguments and OPTION_* environment, the image's program replaced by
    local/emulator/lmi_partition.py; what lands in S3 is what LMI's partition writes."""
    _upload_model(aws, heads=4)
    outcome = aws.job_runner.run(_dev_partition_request("partition-1"), job_arn="arn")
    assert outcome.status == "Completed", outcome.failure_reason
    prefix = "models/partition-1/output/model/"
    s3 = aws.client("s3")
    keys = {o["Key"].removeprefix(prefix) for o in s3.list_objects_v2(Bucket=BUCKET, Prefix=prefix)["Contents"]}
    assert {"config.json", "tokenizer.json", "generation_config.json", "compiled/VERSION", "compiled/STAND-IN"} <= keys
    assert "serving.properties" not in keys  # the job's script drops it
    config = json.loads(s3.get_object(Bucket=BUCKET, Key=prefix + "config.json")["Body"].read())
    assert config["neuron"] == {
        "auto_cast_type": "f16",
        "batch_size": 4,
        "checkpoint_id": None,
        "checkpoint_revision": None,
        "compiler_type": "neuronx-cc",
        "num_cores": 2,
        "sequence_length": 2048,
        "compiler_version": "2.15.141.0",
    }


def test_a_partition_the_device_would_refuse_fails_the_job_with_its_reason(aws):
    _upload_model(aws, heads=3)  # TP 2 does not divide 3 heads
    outcome = aws.job_runner.run(_dev_partition_request("partition-2"), job_arn="arn")
    assert outcome.status == "Failed"
    assert "3 attention heads are not divisible by tensor_parallel_degree 2" in outcome.failure_reason
