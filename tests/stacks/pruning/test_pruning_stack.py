"""The Pruning stack (on in config/dev.yaml, off by default and in prod) on the session's synthesized templates.

No synth of its own: `templates`/`assemblies` come from tests/conftest.py (cdk-nag runs in that synth, so an
unacknowledged finding fails every test here).
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from stacks.application import environment_facts
from stacks.config import ConfigError, PruningConfig, load_config
from stacks.paths import NAS_CODE
from stacks.pruning.stack import pruning_prefix
from tests.synth import ROOT, load_served, replaced

sys.path.insert(0, str(NAS_CODE))
from pruning.metrics import METRIC_DEFINITIONS  # noqa: E402
from pruning.search_space import ModelDims, parameter_specs, sagemaker_parameter_ranges  # noqa: E402

DEV = load_served("dev")  # with its pruning endpoints (tests.synth.served)
PSEUDO = {"AWS::Partition": "aws", "AWS::Region": "us-east-1", "AWS::AccountId": "123456789012"}
STEPS = [
    "ValidateInput",
    "StartTime",
    "Prepare",
    "TrainSupernet",
    "SupernetCompleted",
    "Tune",
    "TuneCompleted",
    "SelectPareto",
    "SelectionCompleted",
    "Export",
    "ExportCompleted",
    "RecordModel",
    "Done",
]
JOBS = ("TrainSupernet", "Tune", "SelectPareto", "Export")


def _render(piece) -> str:
    if isinstance(piece, str):
        return piece
    if "Ref" in piece:
        return PSEUDO.get(piece["Ref"], f"<ref:{piece['Ref']}>")
    if "Fn::ImportValue" in piece:
        return f"<import:{piece['Fn::ImportValue'].split(':', 1)[1]}>"
    if "Fn::GetAtt" in piece:
        return f"<getatt:{'.'.join(piece['Fn::GetAtt'])}>"
    if "Fn::FindInMap" in piece:
        return f"<map:{piece['Fn::FindInMap'][2]}>"
    if "Fn::Sub" in piece:
        return piece["Fn::Sub"]
    raise AssertionError(f"unexpected token {piece}")


def of_type(template: dict, resource_type: str) -> dict[str, dict]:
    return {k: v for k, v in template["Resources"].items() if v["Type"] == resource_type}


@pytest.fixture(scope="module")
def template(templates) -> dict:
    return templates["dev"]["Pruning"]


@pytest.fixture(scope="module")
def asl(template) -> dict:
    (machine,) = of_type(template, "AWS::StepFunctions::StateMachine").values()
    return json.loads("".join(_render(p) for p in machine["Properties"]["DefinitionString"]["Fn::Join"][1]))


def test_off_by_default_and_in_prod(templates):
    assert PruningConfig().enabled is False
    assert load_config("prod", ROOT / "config").pruning.enabled is False
    assert "Pruning" not in templates["prod"]
    assert DEV.pruning.enabled and "Pruning" in templates["dev"]


def test_definition_passes_asl_validator(asl, tmp_path):
    path = tmp_path / "pruning.asl.json"
    path.write_text(re.sub(r"<[a-z]+:[^>]*>", "x", json.dumps(asl)))
    result = subprocess.run(
        ["npx", "--no-install", "asl-validator", "--json-path", str(path)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_all_steps_in_order(asl):
    order, name = [], asl["StartAt"]
    while name:
        order.append(name)
        state = asl["States"][name]
        name = state.get("Next") or (state["Choices"][0]["Next"] if state["Type"] == "Choice" else None)
    assert order == STEPS
    assert asl["States"]["ValidateInput"]["Default"] == "InvalidInput"
    assert asl["States"]["Notify"]["Next"] == "ErrorName"
    (reserved,) = asl["States"]["ErrorName"]["Choices"]
    assert reserved["StringMatches"] == "States.*" and asl["States"][reserved["Next"]]["Error"] == "StepFailed"
    assert asl["States"]["ErrorName"]["Default"] == "Failed" and asl["States"]["Failed"]["Type"] == "Fail"


def test_pruning_data_lives_outside_the_training_trigger(asl, template):
    """datasets/ starts QLoRA runs (the Training rule): the pruning workflow and its jobs use pruning-datasets/."""
    (choice,) = asl["States"]["ValidateInput"]["Choices"]
    assert choice["And"][2] == {
        "Variable": "$.train_data",
        "StringMatches": "s3://<import:ExportsOutputRefArtifactBucket7410C9EF659B6D66>/pruning-datasets/*",
    }
    assert "pruning-datasets/" in asl["States"]["InvalidInput"]["Parameters"]["Cause"]
    reads = json.dumps(_statements(template, "JobRolePolicy"))
    assert "/pruning-datasets/*" in reads and "/datasets/*" not in reads


def test_no_job_that_did_not_complete_is_used(asl):
    """Each job's Choice goes on only for Completed (the tuning job: with a scored trial); else Notify."""
    states = asl["States"]
    for job, check in (
        ("TrainSupernet", "SupernetCompleted"),
        ("Tune", "TuneCompleted"),
        ("SelectPareto", "SelectionCompleted"),
        ("Export", "ExportCompleted"),
    ):
        assert states[job]["Next"] == check and states[check]["Type"] == "Choice"
        not_completed = states[check]["Default"]
        assert not_completed == check.replace("Completed", "NotCompleted")
        assert states[not_completed]["Next"] == "Notify"
        assert states[not_completed]["Parameters"]["Error"] == "JobNotCompleted"
    assert states["ExportCompleted"]["Choices"][0] == {
        "Variable": "$.export.status",
        "StringEquals": "Completed",
        "Next": "RecordModel",
    }
    (tuned,) = states["TuneCompleted"]["Choices"]
    assert tuned["And"] == [
        {"Variable": "$.tuning.status", "StringEquals": "Completed"},
        {"Variable": "$.tuning.objectives.Succeeded", "IsPresent": True},
        {"Variable": "$.tuning.objectives.Succeeded", "NumericGreaterThanEquals": 1},
    ]
    assert states["Tune"]["ResultSelector"]["objectives.$"] == "$.ObjectiveStatusCounters"


def test_every_job_retries_api_errors_and_notifies_on_failure(asl):
    for name in (*JOBS, "RecordModel"):
        state = asl["States"][name]
        assert state["Catch"] == [{"ErrorEquals": ["States.ALL"], "ResultPath": "$.error", "Next": "Notify"}], name
    for name in JOBS:
        (retry,) = asl["States"][name]["Retry"]
        assert "SageMaker.ThrottlingException" in retry["ErrorEquals"]
        assert "SageMaker.ResourceLimitExceededException" in retry["ErrorEquals"]
        assert retry["BackoffRate"] == 2 and retry["MaxAttempts"] >= 3


def test_supernet_job_syncs_with_checkpoints_and_metric_definitions(asl):
    state = asl["States"]["TrainSupernet"]
    assert state["Resource"] == "arn:aws:states:::sagemaker:createTrainingJob.sync"
    params = state["Parameters"]
    assert params["AlgorithmSpecification"]["MetricDefinitions"] == METRIC_DEFINITIONS
    assert params["CheckpointConfig"]["LocalPath"] == "/opt/ml/checkpoints"
    assert "checkpoints/{}/" in params["CheckpointConfig"]["S3Uri.$"]
    hyper = params["HyperParameters"]
    assert hyper["sagemaker_program"] == "train_supernetwork.py"
    assert hyper["search-space"] == DEV.pruning.search_space
    assert hyper["model-name-or-path"] == DEV.pruning.supernet_hyperparameters["model-name-or-path"]
    assert params["InputDataConfig"][0]["DataSource"]["S3DataSource"]["S3Uri.$"] == "$.train_data"
    assert "pruning/{}/jobs/" in params["OutputDataConfig"]["S3OutputPath.$"]
    assert params["ResourceConfig"]["InstanceType"] == DEV.pruning.supernet_instance_type
    assert params["OutputDataConfig"]["KmsKeyId"] and params["ResourceConfig"]["VolumeKmsKeyId"]


def test_tuning_job_is_random_search_over_the_codes_search_space(asl):
    state = asl["States"]["Tune"]
    assert state["Resource"] == "arn:aws:states:::sagemaker:createHyperParameterTuningJob.sync"
    params = state["Parameters"]
    config = params["HyperParameterTuningJobConfig"]
    assert config["Strategy"] == "Random"
    assert config["ResourceLimits"] == {"MaxNumberOfTrainingJobs": 100, "MaxParallelTrainingJobs": 10}
    assert config["HyperParameterTuningJobObjective"] == {"Type": "Minimize", "MetricName": "validation_error"}
    pruning = DEV.pruning
    expected = sagemaker_parameter_ranges(
        pruning.search_space, pruning.num_layers, pruning.num_heads, pruning.intermediate_size
    )
    assert config["ParameterRanges"] == expected
    dims = ModelDims(pruning.num_layers, pruning.num_heads, pruning.intermediate_size)
    names = {r["Name"] for kind in expected.values() for r in kind}
    assert names == {s.name for s in parameter_specs(pruning.search_space, dims)}
    definition = params["TrainingJobDefinition"]
    assert not any(k.startswith(("TrainingJobName", "HyperParameters", "Tags")) for k in definition)
    assert definition["StaticHyperParameters"]["sagemaker_program"] == "evaluate_subnetwork.py"
    assert definition["AlgorithmSpecification"]["MetricDefinitions"] == METRIC_DEFINITIONS
    channels = {c["ChannelName"]: c["DataSource"]["S3DataSource"]["S3Uri.$"] for c in definition["InputDataConfig"]}
    assert channels == {"model": "$.supernet.model_s3_uri", "training": "$.train_data"}
    assert definition["ResourceConfig"]["InstanceType"] == pruning.trial_instance_type
    assert params["HyperParameterTuningJobName.$"] == "States.Format('{}-{}', $.run.name, $$.State.RetryCount)"


def test_tuning_job_names_fit_32_characters():
    prefix = pruning_prefix(DEV.pruning, environment_facts(DEV))
    assert len(f"{prefix}-{'2' * 17}-9") <= 32
    long = replaced(DEV, app_name="a-much-longer-app")
    with pytest.raises(ConfigError, match="pruning.job_name_prefix"):
        pruning_prefix(long.pruning, environment_facts(long))


def test_selection_reads_the_tuning_job_and_writes_to_the_run_prefix(asl):
    params = asl["States"]["SelectPareto"]["Parameters"]
    hyper = params["HyperParameters"]
    assert hyper["sagemaker_program"] == "select_tuning_job.py"
    assert hyper["tuning-job-name.$"] == "$.tuning.name"
    assert re.fullmatch(r"States\.Format\('s3://.+/pruning/\{\}/', \$\.run\.name\)", hyper["output-s3-uri.$"])


def test_export_packs_the_model_and_records_it(asl):
    params = asl["States"]["Export"]["Parameters"]
    assert params["HyperParameters"]["sagemaker_program"] == "export_models.py"
    assert params["HyperParameters"]["inference-code-dir"] == "encoder_code"
    assert params["OutputDataConfig"]["CompressionType"] == "GZIP"
    channels = {c["ChannelName"]: c["DataSource"]["S3DataSource"]["S3Uri.$"] for c in params["InputDataConfig"]}
    assert channels["model"] == "$.supernet.model_s3_uri" and "pareto.json" in channels["pareto"]
    assert channels["training"] == "$.train_data"  # the run's data: the compressed model's error is re-measured
    assert asl["States"]["Export"]["ResultSelector"]["model_s3_uri.$"] == "$.ModelArtifacts.S3ModelArtifacts"
    record = asl["States"]["RecordModel"]
    assert record["Parameters"]["Value.$"] == "$.export.model_s3_uri"
    assert record["Parameters"]["Name"].startswith("<ref:ModelParameter")
    done = asl["States"]["Done"]["Parameters"]
    assert {"model_s3_uri.$", "base_model_s3_uri.$", "pareto_s3_uri.$", "plot_s3_uri.$"} <= set(done)


def test_job_code_tarball_holds_the_scripts_and_the_handler(assemblies):
    out = Path(assemblies["dev"].directory)
    manifest = json.loads((out / "llm-inf2-dev-Pruning.assets.json").read_text())
    (tarball,) = [a["source"]["path"] for a in manifest["files"].values() if a["source"]["path"].endswith(".tar.gz")]
    with tarfile.open(out / tarball) as tar:
        names = set(tar.getnames())
    assert {
        "train_supernetwork.py",
        "evaluate_subnetwork.py",
        "select_tuning_job.py",
        "export_models.py",
        "encoder_code/inference.py",
    } <= names


def test_logging_tracing_and_encryption(template):
    (machine,) = of_type(template, "AWS::StepFunctions::StateMachine").values()
    props = machine["Properties"]
    assert props["LoggingConfiguration"]["Level"] == "ALL" and props["TracingConfiguration"]["Enabled"] is True
    (log_group,) = of_type(template, "AWS::Logs::LogGroup").values()
    assert log_group["Properties"]["RetentionInDays"] == DEV.pruning.log_retention_days
    assert "KmsKeyId" in log_group["Properties"]
    (topic,) = of_type(template, "AWS::SNS::Topic").values()
    assert "KmsMasterKeyId" in topic["Properties"]
    assert not of_type(template, "AWS::Lambda::Function")


def _statements(template: dict, path_part: str) -> dict[str, dict]:
    (policy,) = [v for k, v in of_type(template, "AWS::IAM::ManagedPolicy").items() if k.startswith(path_part)]
    return {s["Sid"]: s for s in policy["Properties"]["PolicyDocument"]["Statement"]}


def test_least_privilege_roles(template):
    workflow = _statements(template, "WorkflowPolicy")
    assert workflow["PassJobRoles"]["Condition"] == {"StringEquals": {"iam:PassedToService": "sagemaker.amazonaws.com"}}
    assert len(workflow["PassJobRoles"]["Resource"]) == 2
    tuning = json.dumps(workflow["OwnTuningJobs"]["Resource"])
    assert "hyper-parameter-tuning-job/llm-inf2-dev-*" in tuning
    select = _statements(template, "SelectApiPolicy")
    assert select["ListTrials"]["Action"] == "sagemaker:ListTrainingJobsForHyperParameterTuningJob"
    assert select["DescribeTrials"]["Action"] == "sagemaker:DescribeTrainingJob"
    endpoint = _statements(template, "EndpointPolicy")
    reads = json.dumps(endpoint["ReadPinnedModels"]["Resource"])
    assert DEV.pruning.base_endpoint.model_key in reads and DEV.pruning.pruned_endpoint.model_key in reads
    assert "/*" not in reads, "each endpoint reads its one model.tar.gz, nothing else"


@pytest.mark.parametrize("name", ["Base", "Pruned"])
def test_base_and_pruned_endpoints(template, name):
    cfg = getattr(DEV.pruning, f"{name.lower()}_endpoint")
    models = {k: v for k, v in of_type(template, "AWS::SageMaker::Model").items() if k.startswith(name)}
    (model,) = models.values()
    container = model["Properties"]["PrimaryContainer"]
    assert container["Environment"]["SAGEMAKER_PROGRAM"] == "inference.py"
    assert container["Image"]["Fn::FindInMap"][2] == "HfPytorchInferenceCpuUri"
    assert cfg.model_key in json.dumps(container["ModelDataUrl"])
    (config,) = [v for k, v in of_type(template, "AWS::SageMaker::EndpointConfig").items() if k.startswith(name)]
    (variant,) = config["Properties"]["ProductionVariants"]
    assert variant["InstanceType"] == cfg.instance_type and "KmsKeyId" in config["Properties"]
    (endpoint,) = [v for k, v in of_type(template, "AWS::SageMaker::Endpoint").items() if k.startswith(name)]
    deployment = endpoint["Properties"]["DeploymentConfig"]
    assert "RollingUpdatePolicy" in deployment
    assert len(deployment["AutoRollbackConfiguration"]["Alarms"]) == 3
    assert "EndpointName" not in endpoint["Properties"] and "ModelName" not in model["Properties"]
    targets = [
        v for k, v in of_type(template, "AWS::ApplicationAutoScaling::ScalableTarget").items() if k.startswith(name)
    ]
    assert len(targets) == 1
    alarms = [k for k in of_type(template, "AWS::CloudWatch::Alarm") if k.startswith(name)]
    assert len(alarms) == 5


def test_endpoint_logical_ids_are_stable(template):
    """As in test_logical_ids.py (dev only: prod has no Pruning stack): clients call the endpoints by their
    generated names, so a renamed logical ID would replace an endpoint and delete the one they call."""
    endpoints = set(of_type(template, "AWS::SageMaker::Endpoint"))
    assert endpoints == {"BaseEndpointF36D3D9A", "PrunedEndpoint57DABD87"}
