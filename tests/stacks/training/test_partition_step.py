"""The LMI NeuronX ahead-of-time compile step of the Training workflow (dev and prod, backend lmi_neuronx).

Expected values come from upstream, not from stacks/serving/backends/lmi_neuronx/compile_step.py: the entry point and
flags from djl-serving 0.30.0-dlc (serving/docker/dockerd-entrypoint.sh, serving/docker/partition/partition.py), the
compiler version from that branch's serving/docker/pytorch-inf2.Dockerfile, the limits from botocore.
"""

from __future__ import annotations

import subprocess

import botocore.session
import pytest
from botocore.validate import ParamValidator

from stacks.config.serving_properties import parse
from stacks.serving.backends.lmi_neuronx.config import render_properties
from tests.stacks.botocore_limits import limit_violations
from tests.stacks.training.test_training_stack import definition, resources_of
from tests.synth import load_served

ENVS = ("dev", "prod")
NEURONX_CC = "2.15.141.0"  # djl-serving 0.30.0-dlc pytorch-inf2.Dockerfile: ARG neuronx_cc_version
IMAGE_PROGRAM = "/usr/local/bin/dockerd-entrypoint.sh"  # same Dockerfile: ENTRYPOINT
COMPILE_TYPES = {"dev": "ml.trn1.2xlarge", "prod": "ml.trn1.32xlarge"}
SHAPES = {"dev": "tp2-np2048-bs4-fp16", "prod": "tp8-np4096-bs8-fp16"}  # serving.lmi of each file


@pytest.fixture(scope="module")
def states(templates):
    return {env: definition(templates[env]["Training"])["States"] for env in ENVS}


def _resolved(value):
    """The Parameters as CreateTrainingJob receives them: run-time fields filled, tokens made valid."""
    run_time = {
        "TrainingJobName.$": "llm-inf2-dev-5d41402abc4b2a76b9719d911017c592-n-0",
        "S3Uri.$": "s3://bucket/models/llm-inf2-dev-5d41402abc4b2a76b9719d911017c592-0-0/output/model/",
        "S3OutputPath.$": "s3://bucket/models/llm-inf2-dev-5d41402abc4b2a76b9719d911017c592-0-0/neuron/x/",
    }
    if isinstance(value, dict):
        return {k.removesuffix(".$"): run_time.get(k, _resolved(v)) for k, v in value.items()}
    if isinstance(value, list):
        return [_resolved(v) for v in value]
    if isinstance(value, str) and value.startswith("<"):
        return "arn:aws:iam::123456789012:role/x" if "Role" in value else "x"
    return value


@pytest.mark.parametrize("env", ENVS)
def test_the_partition_runs_after_the_gate_passed_version_is_recorded(states, env):
    steps = states[env]
    assert steps["RecordModel"]["Next"] == "CompileForNeuron"
    assert steps["CompileForNeuron"]["Resource"] == "arn:aws:states:::sagemaker:createTrainingJob.sync"
    assert steps["CompileForNeuron"]["Next"] == "CompileCompleted"
    assert steps["CompileCompleted"]["Default"] == "CompileNotCompleted"
    assert steps["RecordCompiledModel"]["Next"] == "ReadCompiledFacts"
    assert steps["ReadCompiledFacts"]["Next"] == "RegisterCompiledModel"
    assert [c["Next"] for c in steps["CompileForNeuron"]["Catch"]] == ["Notify"]


@pytest.mark.parametrize("env", ENVS)
def test_the_job_runs_the_lmi_images_partition_with_the_served_settings(states, env):
    params = states[env]["CompileForNeuron"]["Parameters"]
    spec = params["AlgorithmSpecification"]
    assert spec["ContainerEntrypoint"][:2] == ["/bin/bash", "-c"] and len(spec["ContainerEntrypoint"]) == 4
    assert spec["ContainerArguments"] == [
        NEURONX_CC,  # what the script checks compiled/VERSION against
        IMAGE_PROGRAM,
        "partition",  # dockerd-entrypoint.sh: `partition` or `train` runs /opt/djl/partition/partition.py
        "--model-dir",  # partition.py: the properties folder (default /opt/ml/input/data/training)
        "/opt/ml/input/data/model",
        "--model-id",  # the model: the `model` channel, the merged model
        "/opt/ml/input/data/model",
        "--engine",  # partition.py reads properties['engine'] after partitioning
        "Python",
        "--save-mp-checkpoint-path",  # a local folder: SageMaker uploads /opt/ml/model
        "/opt/ml/model",
        "--skip-copy",  # tnx_aot_tutorial.md; else the source config.json replaces the compiled one's
    ]
    assert "LmiNeuronxUri" in spec["TrainingImage"]
    # every served option reaches partition.py as OPTION_<X> (properties_manager.py / utils.py read them)
    served = parse(render_properties(load_served(env).serving))
    assert params["Environment"] == {
        "OPTION_" + key.removeprefix("option.").upper(): value for key, value in served.items()
    }
    assert params["Environment"]["OPTION_TENSOR_PARALLEL_DEGREE"] == SHAPES[env].split("-")[0].removeprefix("tp")
    assert params["ResourceConfig"]["InstanceType"] == COMPILE_TYPES[env]
    assert params["OutputDataConfig"]["CompressionType"] == "NONE"
    assert params["OutputDataConfig"]["S3OutputPath.$"].endswith(
        f"/models/{{}}/neuron/{SHAPES[env]}-neuronx-cc-{NEURONX_CC}/', $.training.job_name)"
    )
    assert params["InputDataConfig"][0]["DataSource"]["S3DataSource"]["S3Uri.$"] == "$.training.model_s3_uri"


@pytest.mark.parametrize("env", ENVS)
def test_the_request_is_within_what_create_training_job_accepts(states, env):
    params = _resolved(states[env]["CompileForNeuron"]["Parameters"])
    shape = botocore.session.get_session().get_service_model("sagemaker").operation_model("CreateTrainingJob")
    report = ParamValidator().validate(params, shape.input_shape)
    assert not report.has_errors(), report.generate_report()
    assert limit_violations("sagemaker", "CreateTrainingJob", params) == []  # item <= 256 chars, enum, patterns


@pytest.mark.parametrize("env", ENVS)
def test_the_compiled_version_is_registered_for_lmi_with_its_image(states, env):
    compiled = states[env]["RegisterCompiledModel"]["Parameters"]
    (container,) = compiled["InferenceSpecification"]["Containers"]
    assert container["Image"] == "<map:LmiNeuronxUri>"
    assert container["Environment"] == {"OPTION_MODEL_ID": "/opt/ml/model"}
    assert container["ModelDataSource"]["S3DataSource"]["S3Uri.$"] == "$.compile.model_s3_uri"
    assert compiled["CustomerMetadataProperties"]["serving_backend"] == "lmi_neuronx"
    assert compiled["CustomerMetadataProperties"]["merged_package.$"] == "$.registry.model_package_arn"


@pytest.mark.parametrize("env", ENVS)
def test_the_compiled_shape_is_read_from_the_compiled_models_own_config(states, env):
    """config.json's `neuron` section (djl_python neuron_utils/model_loader.py update_model_config_to_neuron:
    num_cores, sequence_length, batch_size, auto_cast_type, compiler_version) into the version's metadata."""
    read = states[env]["ReadCompiledFacts"]
    assert read["Resource"] == "arn:aws:states:::aws-sdk:s3:getObject"
    assert read["Parameters"]["Key.$"] == (
        f"States.Format('models/{{}}/neuron/{SHAPES[env]}-neuronx-cc-{NEURONX_CC}/{{}}/output/model/config.json', "
        "$.training.job_name, $.compile.job_name)"
    )
    assert read["ResultSelector"] == {"config.$": "States.StringToJson($.Body)"}
    metadata = states[env]["RegisterCompiledModel"]["Parameters"]["CustomerMetadataProperties"]
    assert {k: v for k, v in metadata.items() if "compile" in k and k != "compile_job.$"} == {
        "compiled_tensor_parallel_degree.$": "States.JsonToString($.compiled.config.neuron.num_cores)",
        "compiled_n_positions.$": "States.JsonToString($.compiled.config.neuron.sequence_length)",
        "compiled_batch_size.$": "States.JsonToString($.compiled.config.neuron.batch_size)",
        "compiled_dtype.$": "$.compiled.config.neuron.auto_cast_type",
        "compiler_version.$": "$.compiled.config.neuron.compiler_version",
    }


@pytest.mark.parametrize("env", ENVS)
def test_the_compile_role_pulls_the_lmi_image_and_reads_and_writes_models_only(templates, env):
    (policy,) = [
        p
        for k, p in resources_of(templates[env]["Training"], "AWS::IAM::ManagedPolicy").items()
        if k.startswith("CompileRole")
    ]
    statements = {s["Sid"]: s for s in policy["Properties"]["PolicyDocument"]["Statement"]}
    assert statements["ListInputs"]["Condition"] == {"StringLike": {"s3:prefix": ["models/*"]}}
    assert "ReadTrainingCode" not in statements
    pulls = [s for s in statements.values() if "ecr:BatchGetImage" in s["Action"]]
    assert len(pulls) == 1 and "LmiNeuronxRepository" in str(pulls[0]["Resource"])  # the mapped repository


FAKE_PROGRAM = """#!/bin/bash
printf '%s\\n' "$@" > "$FAKE_LOG"
env | grep '^OPTION_' | sort > "$FAKE_LOG.env"
[ "${FAKE_WRITES:-1}" = 1 ] || exit "${FAKE_EXIT:-0}"
out=${@: -2:1}
mkdir -p "$out/compiled"; echo '{"neuron": {}}' > "$out/config.json"; echo 'engine=Python' > "$out/serving.properties"
printf '%s' "${FAKE_VERSION}" > "$out/compiled/VERSION"
exit "${FAKE_EXIT:-0}"
"""


def _run_container(states, tmp_path, *, version=f"{NEURONX_CC}+d3cfc8ca", writes=True, fail=0, generation=True):
    """The job's command as the container runs it (entrypoint + arguments, no shell around it), /opt/ml under
    tmp_path and a fake image program that records its arguments and writes what partition.py writes."""
    params = states["dev"]["CompileForNeuron"]["Parameters"]
    spec = params["AlgorithmSpecification"]
    opt_ml = tmp_path / "opt" / "ml"
    model = opt_ml / "input" / "data" / "model"
    model.mkdir(parents=True)
    if generation:
        (model / "generation_config.json").write_text('{"do_sample": true}')
    program = tmp_path / "dockerd-entrypoint.sh"
    program.write_text(FAKE_PROGRAM)
    program.chmod(0o755)
    command = [*spec["ContainerEntrypoint"], *spec["ContainerArguments"]]
    argv = [str(program) if item == IMAGE_PROGRAM else item.replace("/opt/ml", str(opt_ml)) for item in command]
    env = {
        **params["Environment"],
        "PATH": "/usr/bin:/bin",
        "FAKE_LOG": str(tmp_path / "args"),
        "FAKE_VERSION": version,
        "FAKE_WRITES": "1" if writes else "0",
        "FAKE_EXIT": str(fail),
    }
    result = subprocess.run(argv, env=env, capture_output=True, text=True, check=False, timeout=30)
    return result, opt_ml


def test_the_container_runs_the_program_then_keeps_its_model_and_the_generation_config(states, tmp_path):
    result, opt_ml = _run_container(states, tmp_path)
    assert result.returncode == 0, result.stderr
    args = (tmp_path / "args").read_text().splitlines()
    assert args[0] == "partition" and args[-3:] == ["--save-mp-checkpoint-path", f"{opt_ml}/model", "--skip-copy"]
    assert "OPTION_TENSOR_PARALLEL_DEGREE=2" in (tmp_path / "args.env").read_text().splitlines()
    assert (opt_ml / "model" / "generation_config.json").read_text() == '{"do_sample": true}'
    # the program's serving.properties would override the endpoint's environment where the folder is mounted
    assert not (opt_ml / "model" / "serving.properties").exists()
    assert (opt_ml / "model" / "config.json").exists()


def test_a_partition_that_exits_0_without_a_compiled_model_fails_the_job(states, tmp_path):
    """partition.py logs a bad property and returns (exit 0): the job must not count as done."""
    result, _ = _run_container(states, tmp_path, writes=False)
    assert result.returncode != 0


def test_a_model_from_another_compiler_fails_the_job_with_one_line(states, tmp_path):
    result, _ = _run_container(states, tmp_path, version="2.14.227.0+9f9a3ab4")
    assert result.returncode == 3
    assert result.stderr.strip() == f"neuronx-cc 2.14.227.0+9f9a3ab4, not {NEURONX_CC}"


def test_the_programs_failure_is_the_jobs_and_a_missing_generation_config_is_skipped(states, tmp_path):
    failed, _ = _run_container(states, tmp_path / "a", fail=4)
    assert failed.returncode == 4  # set -e: the program's exit code is the job's
    passed, opt_ml = _run_container(states, tmp_path / "b", generation=False)
    assert passed.returncode == 0, passed.stderr
    assert not (opt_ml / "model" / "generation_config.json").exists()
