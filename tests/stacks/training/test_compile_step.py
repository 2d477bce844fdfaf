"""The Neuron compile step of the Training workflow (config/staging.yaml, backend vllm_neuronx)."""

from __future__ import annotations

import json
import subprocess

import botocore.session
import pytest
from botocore.validate import ParamValidator

from tests.stacks.training.test_training_stack import _asl_safe, definition, resources_of
from tests.synth import ROOT, load_served

STAGING = load_served("staging")
# What the state machine resolves the `.$` fields to at run time, shaped as SageMaker will see them.
RUN_TIME = {
    "TrainingJobName.$": "llm-inf2-staging-5d41402abc4b2a76b9719d911017c592-n-0",
    "S3Uri.$": "s3://bucket/models/llm-inf2-staging-5d41402abc4b2a76b9719d911017c592-0-0/output/model/",
    "S3OutputPath.$": "s3://bucket/models/llm-inf2-staging-5d41402abc4b2a76b9719d911017c592-0-0/neuron/bs4-seq4096-tp2/",
}


@pytest.fixture(scope="module")
def states(templates):
    return definition(templates["staging"]["Training"])["States"]


def _resolved(value):
    """The Parameters as the CreateTrainingJob call receives them: run-time fields filled, tokens made valid."""
    if isinstance(value, dict):
        return {k.removesuffix(".$"): RUN_TIME.get(k, _resolved(v)) for k, v in value.items()}
    if isinstance(value, list):
        return [_resolved(v) for v in value]
    if isinstance(value, str) and value.startswith("<"):
        return "arn:aws:iam::123456789012:role/x" if "Role" in value else "x"
    return value


def test_compile_runs_after_the_merged_model_passed_the_gate_and_is_recorded(states):
    assert states["Train"]["Next"] == "TrainCompleted"
    assert states["TrainCompleted"]["Choices"][0]["Next"] == "Benchmark"  # staging's benchmark job, then:
    assert states["BenchmarkWithin"]["Next"] == "DescribeRun"  # the registry's gate and lineage
    assert states["RegisterModel"]["Next"] == "GatePassed"
    assert states["GatePassed"]["Choices"] == [
        {"Variable": "$.approval.status", "StringEquals": "PendingManualApproval", "Next": "RecordModel"},
        {"Variable": "$.approval.benchmark", "IsPresent": True, "Next": "BenchmarkModelRejected"},
    ]
    assert states["GatePassed"]["Default"] == "ModelRejected"  # a rejected model is never compiled
    assert states["RecordModel"]["Next"] == "CompileForNeuron"
    assert states["CompileForNeuron"]["Next"] == "CompileCompleted"
    assert states["CompileCompleted"]["Choices"] == [
        {"Variable": "$.compile.status", "StringEquals": "Completed", "Next": "RecordCompiledModel"}
    ]
    assert states["CompileCompleted"]["Default"] == "CompileNotCompleted"
    assert states["CompileNotCompleted"]["Next"] == "Notify"
    assert states["RecordCompiledModel"]["Next"] == "RegisterCompiledModel"
    assert states["RegisterCompiledModel"]["Next"] == "Done"
    assert states["CompileForNeuron"]["Resource"] == "arn:aws:states:::sagemaker:createTrainingJob.sync"
    assert [c["Next"] for c in states["CompileForNeuron"]["Catch"]] == ["Notify"]
    assert "SageMaker.ThrottlingException" in states["CompileForNeuron"]["Retry"][0]["ErrorEquals"]


def test_the_compiled_model_is_its_own_package_version(states):
    """Same group and gate status as the merged version, the vllm_neuronx image, the compiled prefix, and the
    merged version's ARN in its metadata."""
    merged, compiled = states["RegisterModel"]["Parameters"], states["RegisterCompiledModel"]["Parameters"]
    assert compiled["ModelPackageGroupName"] == merged["ModelPackageGroupName"]
    assert compiled["ModelApprovalStatus.$"] == merged["ModelApprovalStatus.$"] == "$.approval.status"
    (container,) = compiled["InferenceSpecification"]["Containers"]
    assert container["Image"] == "<map:VllmNeuronxUri>"
    assert container["ModelDataSource"]["S3DataSource"] == {
        "S3Uri.$": "$.compile.model_s3_uri",
        "S3DataType": "S3Prefix",
        "CompressionType": "None",
    }
    assert compiled["CustomerMetadataProperties"]["merged_package.$"] == "$.registry.model_package_arn"
    assert compiled["CustomerMetadataProperties"]["serving_backend"] == "vllm_neuronx"


def test_compile_request_is_a_valid_create_training_job_call(states):
    params = _resolved(states["CompileForNeuron"]["Parameters"])
    shape = botocore.session.get_session().get_service_model("sagemaker").operation_model("CreateTrainingJob")
    report = ParamValidator().validate(params, shape.input_shape)
    assert not report.has_errors(), report.generate_report()


def test_compile_exports_the_served_shape_in_the_serving_image(states, templates):
    params = states["CompileForNeuron"]["Parameters"]
    spec = params["AlgorithmSpecification"]
    assert spec["ContainerEntrypoint"][:2] == ["/bin/bash", "-c"]
    neuron = STAGING.serving.neuron
    assert spec["ContainerArguments"] == [
        "--model",
        "/opt/ml/input/data/model",
        "--task",
        "text-generation",
        "--batch_size",
        str(neuron.batch_size),
        "--sequence_length",
        str(neuron.sequence_length),
        "--tensor_parallel_size",
        str(neuron.tensor_parallel_size),
        "--instance_type",
        "inf2",
        "/opt/ml/model",
    ]
    assert "VllmNeuronxUri" in spec["TrainingImage"]
    assert params["OutputDataConfig"]["CompressionType"] == "NONE"
    assert params["OutputDataConfig"]["S3OutputPath.$"].endswith(
        f"/models/{{}}/{neuron.compiled_folder}', $.training.job_name)"
    )
    assert params["ResourceConfig"]["InstanceType"] == "ml.r5.4xlarge"
    assert params["InputDataConfig"][0]["DataSource"]["S3DataSource"]["S3Uri.$"] == "$.training.model_s3_uri"


FAKE_OPTIMUM_CLI = """#!/bin/sh
printf '%s\\n' "$@" > "$FAKE_LOG"
out=$(eval echo \\${$#})
mkdir -p "$out" && echo '{}' > "$out/neuron_config.json"
exit "${FAKE_EXIT:-0}"
"""


def _run_container(states, tmp_path, *, with_generation_config=True, fail=0):
    """Run the job's command as the container would (entrypoint + arguments, exec'd, no shell around it), with
    /opt/ml under tmp_path and a fake `optimum-cli` on PATH that records its arguments and writes an export."""
    spec = states["CompileForNeuron"]["Parameters"]["AlgorithmSpecification"]
    opt_ml = tmp_path / "opt" / "ml"
    model = opt_ml / "input" / "data" / "model"
    model.mkdir(parents=True)
    if with_generation_config:
        (model / "generation_config.json").write_text('{"do_sample": true}')
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    cli = bin_dir / "optimum-cli"
    cli.write_text(FAKE_OPTIMUM_CLI)
    cli.chmod(0o755)
    command = [*spec["ContainerEntrypoint"], *spec["ContainerArguments"]]
    argv = [item.replace("/opt/ml", str(opt_ml)) for item in command]
    env = {"PATH": f"{bin_dir}:/usr/bin:/bin", "FAKE_LOG": str(tmp_path / "args"), "FAKE_EXIT": str(fail)}
    result = subprocess.run(argv, env=env, capture_output=True, text=True, check=False, timeout=30)
    return result, opt_ml


def test_the_container_command_runs_the_export_then_copies_the_generation_config(states, tmp_path):
    result, opt_ml = _run_container(states, tmp_path)
    assert result.returncode == 0, result.stderr
    neuron = STAGING.serving.neuron
    assert (tmp_path / "args").read_text().split("\n")[:-1] == [
        "export",
        "neuron",
        "--model",
        f"{opt_ml}/input/data/model",
        "--task",
        "text-generation",
        "--batch_size",
        str(neuron.batch_size),
        "--sequence_length",
        str(neuron.sequence_length),
        "--tensor_parallel_size",
        str(neuron.tensor_parallel_size),
        "--instance_type",
        "inf2",
        f"{opt_ml}/model",
    ]
    assert (opt_ml / "model" / "generation_config.json").read_text() == '{"do_sample": true}'
    assert (opt_ml / "model" / "neuron_config.json").exists()


def test_the_container_command_fails_with_the_export_and_skips_a_missing_generation_config(states, tmp_path):
    failed, _ = _run_container(states, tmp_path / "a", fail=3)
    assert failed.returncode == 3  # set -e: the export's exit code is the job's
    passed, opt_ml = _run_container(states, tmp_path / "b", with_generation_config=False)
    assert passed.returncode == 0, passed.stderr
    assert not (opt_ml / "model" / "generation_config.json").exists()


def test_every_command_item_is_within_create_training_job_limits(states):
    """botocore's SageMaker model: each item at most 256 characters, at most 100 items (ParamValidator skips it)."""
    spec = states["CompileForNeuron"]["Parameters"]["AlgorithmSpecification"]
    model = botocore.session.get_session().get_service_model("sagemaker")
    for field, shape in (
        ("ContainerEntrypoint", "TrainingContainerEntrypoint"),
        ("ContainerArguments", "TrainingContainerArguments"),
    ):
        items = model.shape_for(shape)
        assert len(spec[field]) <= items.metadata["max"]
        assert max(map(len, spec[field])) <= items.member.metadata["max"], field


def test_compiled_prefix_is_what_staging_serves(states):
    """Train's job name + the compile output path + SageMaker's <job>/output/model/ = serving.model_prefix's form."""
    output = RUN_TIME["S3OutputPath.$"].removeprefix("s3://bucket/")
    served = f"{output}{RUN_TIME['TrainingJobName.$']}/output/model/"
    assert served == STAGING.serving.model_prefix


def test_compiled_model_goes_to_its_own_parameter(states, templates):
    record = states["RecordCompiledModel"]
    assert record["Parameters"]["Name"].startswith("<ref:CompiledModelParameter")
    parameters = resources_of(templates["staging"]["Training"], "AWS::SSM::Parameter")
    (parameter,) = [p for k, p in parameters.items() if k.startswith("CompiledModelParameter")]
    assert parameter["Properties"]["Name"] == "/llm-inf2/staging/training/compiled-model-s3-uri"
    assert record["Parameters"]["Value.$"] == "$.compile.model_s3_uri"
    policy = [
        p
        for p in resources_of(templates["staging"]["Training"], "AWS::IAM::ManagedPolicy").values()
        if any(s.get("Sid") == "RecordCompiledModel" for s in p["Properties"]["PolicyDocument"]["Statement"])
    ]
    assert len(policy) == 1


def test_compile_role_reads_and_writes_models_only(templates):
    (role_policy,) = [
        p
        for k, p in resources_of(templates["staging"]["Training"], "AWS::IAM::ManagedPolicy").items()
        if k.startswith("CompileRole")
    ]
    statements = {s["Sid"]: s for s in role_policy["Properties"]["PolicyDocument"]["Statement"]}
    assert "ReadTrainingCode" not in statements
    assert statements["ListInputs"]["Condition"] == {"StringLike": {"s3:prefix": ["models/*"]}}


def test_staging_definition_passes_asl_validator(states, templates, tmp_path):
    path = tmp_path / "staging.asl.json"
    path.write_text(json.dumps(_asl_safe(definition(templates["staging"]["Training"]))))
    result = subprocess.run(
        ["npx", "--no-install", "asl-validator", "--json-path", str(path)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert result.returncode == 0 and "is valid" in result.stdout, result.stdout + result.stderr
