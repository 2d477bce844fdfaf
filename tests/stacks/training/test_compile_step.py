"""The Neuron compile step of the Training workflow (config/staging.yaml, backend vllm_neuronx)."""

from __future__ import annotations

import json
import subprocess

import botocore.session
import pytest
from botocore.validate import ParamValidator

from stacks.config import load_config
from tests.stacks.training.test_training_stack import _asl_safe, definition, resources_of
from tests.synth import ROOT

STAGING = load_config("staging", ROOT / "config")
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


def test_compile_runs_after_the_merged_model_is_recorded(states):
    assert states["Train"]["Next"] == "RecordModel"
    assert states["RecordModel"]["Next"] == "DescribeRun"  # the registry's gate and lineage (registry.py)
    assert states["RegisterModel"]["Next"] == "CompileForNeuron"
    assert states["CompileForNeuron"]["Next"] == "RecordCompiledModel"
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
        "S3Uri.$": "$.compile.model_s3_uri", "S3DataType": "S3Prefix", "CompressionType": "None"}
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
    assert spec["ContainerEntrypoint"] == ["/bin/bash", "-c"]
    (command,) = spec["ContainerArguments"]
    neuron = STAGING.serving.neuron
    assert (f"optimum-cli export neuron --model /opt/ml/input/data/model --task text-generation "
            f"--batch_size {neuron.batch_size} --sequence_length {neuron.sequence_length} "
            f"--tensor_parallel_size {neuron.tensor_parallel_size} --instance_type inf2 /opt/ml/model") in command
    assert "cp /opt/ml/input/data/model/generation_config.json /opt/ml/model/" in command
    assert "VllmNeuronxUri" in spec["TrainingImage"]
    assert params["OutputDataConfig"]["CompressionType"] == "NONE"
    assert params["OutputDataConfig"]["S3OutputPath.$"].endswith(
        f"/models/{{}}/{neuron.compiled_folder}', $.training.job_name)"
    )
    assert params["ResourceConfig"]["InstanceType"] == "ml.r5.4xlarge"
    assert params["InputDataConfig"][0]["DataSource"]["S3DataSource"]["S3Uri.$"] == "$.training.model_s3_uri"


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
    policy = [p for p in resources_of(templates["staging"]["Training"], "AWS::IAM::ManagedPolicy").values()
              if any(s.get("Sid") == "RecordCompiledModel" for s in p["Properties"]["PolicyDocument"]["Statement"])]
    assert len(policy) == 1


def test_compile_role_reads_and_writes_models_only(templates):
    (role_policy,) = [p for k, p in resources_of(templates["staging"]["Training"], "AWS::IAM::ManagedPolicy").items()
                      if k.startswith("CompileRole")]
    statements = {s["Sid"]: s for s in role_policy["Properties"]["PolicyDocument"]["Statement"]}
    assert "ReadTrainingCode" not in statements
    assert statements["ListInputs"]["Condition"] == {"StringLike": {"s3:prefix": ["models/*"]}}


@pytest.mark.parametrize("env", ["dev", "prod"])
def test_lmi_environments_have_no_compile_step(templates, env):
    assert "CompileForNeuron" not in definition(templates[env]["Training"])["States"]


def test_staging_definition_passes_asl_validator(states, templates, tmp_path):
    path = tmp_path / "staging.asl.json"
    path.write_text(json.dumps(_asl_safe(definition(templates["staging"]["Training"]))))
    result = subprocess.run(["npx", "--no-install", "asl-validator", "--json-path", str(path)], cwd=ROOT,
                            capture_output=True, text=True, check=False, timeout=120)
    assert result.returncode == 0 and "is valid" in result.stdout, result.stdout + result.stderr
