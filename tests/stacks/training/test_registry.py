"""The registry states of the synthesized Training machine, executed on moto (its ASL interpreter forwards the
aws-sdk integrations to moto's SageMaker and S3): the quality gate on the job's `eval_loss_improvement`
metric, the model's facts read from its folder, the lineage manifest naming object versions that exist, and the
CreateModelPackage request as the interpreter sent it, checked against botocore (ParamValidator plus
max/pattern/enum, which it skips).

The machine starts at DescribeRun (right after TrainCompleted) with the state a real run has there and ends at
RegisterModel; the job is a moto training job whose FinalMetricDataList is the recorded shape SageMaker returns,
and its model folder holds the model_facts.json train.py's facts module writes (tests/stacks/model_folder.py).
"""

from __future__ import annotations

import json
import logging
import re

import boto3
import botocore.session
import pytest
from botocore.validate import ParamValidator
from moto import mock_aws
from moto.sagemaker import models as sagemaker_models

from local.emulator.execution_patches import aws_sdk_answers_as_json
from stacks.training.registry import FACT_TYPES
from tests.stacks.botocore_limits import limit_violations
from tests.stacks.job_outcomes import entered, run_execution
from tests.stacks.model_folder import model_facts_body
from tests.stacks.training.test_training_stack import definition

REGION, ACCOUNT = "us-east-1", "123456789012"
BUCKET = "llm-inf2-dev-data-artifactbucket-x1"
BUCKET_TOKENS = ("<import:ExportsOutputRefArtifactBucket7410C9EF659B6D66>",)
IMAGE = "763104351884.dkr.ecr.us-east-1.amazonaws.com/djl-inference:0.30.0-neuronx-sdk2.20.1"
SHARDS = ("datasets/guanaco/train-00000.jsonl", "datasets/guanaco/train-00001.jsonl", "datasets/guanaco/_READY")


def _registry_machine(template: dict) -> tuple[dict, str]:
    """The definition from DescribeRun on, RegisterModel the end; the group name it registers in."""
    text = json.dumps(definition(template))
    for token in BUCKET_TOKENS:
        text = text.replace(token, BUCKET)
    text = text.replace("<map:LmiNeuronxUri>", IMAGE)
    text = re.sub(r"<[a-z]+:[^>]*>", "x", text)
    asl = json.loads(text)
    asl["StartAt"] = "DescribeRun"
    register = asl["States"]["RegisterModel"]
    register.pop("Next")
    register["End"] = True
    return asl, register["Parameters"]["ModelPackageGroupName"]


@pytest.fixture(scope="module")
def aws(templates):
    logging.getLogger("moto").setLevel(logging.CRITICAL)
    aws_sdk_answers_as_json()  # as AWS answers (local/emulator/execution_patches.py)
    with mock_aws(config={"stepfunctions": {"execute_state_machine": True}}):
        clients = {n: boto3.client(n, region_name=REGION) for n in ("s3", "sagemaker", "stepfunctions", "sns")}
        asl, group = _registry_machine(templates["dev"]["Training"])
        s3 = clients["s3"]
        s3.create_bucket(Bucket=BUCKET)
        s3.put_bucket_versioning(Bucket=BUCKET, VersioningConfiguration={"Status": "Enabled"})
        for key in SHARDS:
            s3.put_object(Bucket=BUCKET, Key=key, Body=b'{"text": "old"}\n')
            s3.put_object(Bucket=BUCKET, Key=key, Body=b'{"text": "a row"}\n')  # the current version
        s3.put_object(Bucket=BUCKET, Key="datasets/guanaco-v2/train.jsonl", Body=b"{}\n")  # another dataset
        clients["sagemaker"].create_model_package_group(ModelPackageGroupName=group)
        clients["group"] = group
        clients["machine"] = clients["stepfunctions"].create_state_machine(
            name="registry", definition=json.dumps(asl), roleArn=f"arn:aws:iam::{ACCOUNT}:role/training-workflow"
        )["stateMachineArn"]
        yield clients


def _training_job(aws, name: str, metrics: dict[str, float]) -> None:
    aws["sagemaker"].create_training_job(
        TrainingJobName=name,
        RoleArn=f"arn:aws:iam::{ACCOUNT}:role/job",
        AlgorithmSpecification={"TrainingImage": IMAGE, "TrainingInputMode": "File"},
        OutputDataConfig={"S3OutputPath": f"s3://{BUCKET}/models/"},
        ResourceConfig={"InstanceType": "ml.m5.xlarge", "InstanceCount": 1, "VolumeSizeInGB": 10},
        StoppingCondition={"MaxRuntimeInSeconds": 3600},
    )
    job = sagemaker_models.sagemaker_backends[ACCOUNT][REGION].training_jobs[name]
    job.final_metric_data_list = [
        {"MetricName": k, "Value": v, "Timestamp": "2026-12-01T00:00:00Z"} for k, v in metrics.items()
    ]
    if not metrics:  # DescribeTrainingJob leaves the member out for a job that logged no metric
        job.final_metric_data_list = None


def _run(aws, name: str, metrics: dict[str, float], **execution_input) -> tuple[dict, list[dict]]:
    _training_job(aws, name, metrics)
    aws["s3"].put_object(
        Bucket=BUCKET, Key=f"models/{name}/output/model/model_facts.json", Body=model_facts_body("tiny/base")
    )
    state = {
        "train_data": f"s3://{BUCKET}/datasets/guanaco/",
        **execution_input,
        "run": {"name": name, "hyperparameters": {"learning_rate": "0", "model_id": "tiny/base"}},
        "training": {"job_name": name, "model_s3_uri": f"s3://{BUCKET}/models/{name}/output/model/"},
    }
    return run_execution(aws, aws["machine"], state, name)


def _package(aws, execution: dict) -> dict:
    assert execution["status"] == "SUCCEEDED", execution.get("cause")
    arn = json.loads(execution["output"])["registry"]["model_package_arn"]
    return aws["sagemaker"].describe_model_package(ModelPackageName=arn)


TRAINED = {"eval_loss_base": 3.2, "eval_loss_merged": 1.1, "eval_loss_improvement": 2.1}
UNTRAINED = {"eval_loss_base": 3.2, "eval_loss_merged": 3.2, "eval_loss_improvement": 0.0}  # --learning_rate 0


@pytest.mark.parametrize(
    ("case", "metrics", "status"),
    [
        ("trained", TRAINED, "PendingManualApproval"),
        ("lr0", UNTRAINED, "Rejected"),
        ("noeval", {"train_loss": 1.0}, "Rejected"),
        ("nometrics", {}, "Rejected"),
    ],
)
def test_the_gate_sets_the_approval_status_from_the_metric(aws, case, metrics, status):
    package = _package(aws, _run(aws, f"llm-inf2-dev-{case}-0-0", metrics)[0])
    assert package["ModelApprovalStatus"] == status
    metadata = package["CustomerMetadataProperties"]
    assert metadata["quality_gate_min_improvement"] == "0.01"  # config/dev.yaml
    assert metadata["eval_loss_improvement"] == (
        "none" if case in ("noeval", "nometrics") else str(metrics["eval_loss_improvement"])
    )


def test_the_package_serves_the_merged_prefix_on_inf2_with_its_evaluation(aws):
    name = "llm-inf2-dev-serves-0-0"
    package = _package(aws, _run(aws, name, TRAINED)[0])
    model = f"s3://{BUCKET}/models/{name}/output/model/"
    (container,) = package["InferenceSpecification"]["Containers"]
    assert container["Image"] == IMAGE
    assert container["ModelDataSource"] == {
        "S3DataSource": {"S3Uri": model, "S3DataType": "S3Prefix", "CompressionType": "None"}
    }
    assert package["InferenceSpecification"]["SupportedRealtimeInferenceInstanceTypes"] == ["ml.inf2.xlarge"]
    assert package["ModelMetrics"]["ModelQuality"]["Statistics"]["S3Uri"] == f"{model}evaluation.json"
    assert package["ModelPackageGroupName"] == aws["group"]
    assert package["CustomerMetadataProperties"]["serving_backend"] == "lmi_neuronx"


def test_lineage_names_the_current_versions_of_the_dataset_objects(aws):
    name = "llm-inf2-dev-lineage-0-0"
    metadata = _package(aws, _run(aws, name, TRAINED)[0])["CustomerMetadataProperties"]
    s3 = aws["s3"]
    lineage_key = f"models/{name}/lineage.json"
    assert metadata["lineage"] == f"s3://{BUCKET}/{lineage_key}"
    manifest = json.loads(
        s3.get_object(Bucket=BUCKET, Key=lineage_key, VersionId=metadata["lineage_version_id"])["Body"].read()
    )
    listed = {o["Key"]: o["VersionId"] for o in manifest["dataset_objects"]}
    assert sorted(listed) == sorted(SHARDS)  # not guanaco-v2/, not the older versions
    assert metadata["dataset_objects"] == str(len(SHARDS))
    for key, version in listed.items():
        assert s3.head_object(Bucket=BUCKET, Key=key)["VersionId"] == version  # exists, and is current
    assert manifest["hyperparameters"]["learning_rate"] == "0"
    assert manifest["base_model_source"] == metadata["base_model_source"] == "tiny/base"  # dev: the model_id
    assert re.fullmatch(r"[0-9a-f]{64}", manifest["code_asset_hash"])
    assert metadata["dataset_prefix"] == manifest["dataset_prefix"] == "datasets/guanaco/"
    facts = json.loads(s3.get_object(Bucket=BUCKET, Key=f"models/{name}/output/model/model_facts.json")["Body"].read())
    assert manifest["model_facts"] == facts


def test_the_package_metadata_carries_the_model_facts_under_their_own_names(aws):
    name = "llm-inf2-dev-facts-0-0"
    metadata = _package(aws, _run(aws, name, TRAINED)[0])["CustomerMetadataProperties"]
    body = aws["s3"].get_object(Bucket=BUCKET, Key=f"models/{name}/output/model/model_facts.json")["Body"].read()
    facts = json.loads(body)
    assert set(facts) == set(FACT_TYPES)
    expected = {k: json.dumps(v) if not isinstance(v, str) else v for k, v in facts.items()}  # 744, true
    assert {k: metadata[k] for k in facts} == expected
    assert expected["chat_template"] == "true" and expected["parameters"].isdigit()


@pytest.mark.parametrize(
    ("execution_input", "recorded"),
    [
        ({"dataset_marker_version_id": "3sL4kqtJlcpXroDTDmJ+rmSpXd3dIbrH"}, "3sL4kqtJlcpXroDTDmJ+rmSpXd3dIbrH"),
        ({}, "absent"),  # started by hand (tools/start_training.py): no marker event
        ({"dataset_marker_version_id": None}, "absent"),
    ],
)
def test_lineage_names_the_dataset_marker_version_or_says_it_is_absent(aws, execution_input, recorded):
    name = f"llm-inf2-dev-marker-{len(execution_input)}-{execution_input.get('dataset_marker_version_id') is None}"
    metadata = _package(aws, _run(aws, name, TRAINED, **execution_input)[0])["CustomerMetadataProperties"]
    assert metadata["dataset_marker_version_id"] == recorded
    lineage = aws["s3"].get_object(Bucket=BUCKET, Key=f"models/{name}/lineage.json")["Body"].read()
    assert json.loads(lineage)["dataset_marker_version_id"] == recorded


def test_a_model_folder_without_facts_is_not_registered(aws):
    name = "llm-inf2-dev-nofacts-0-0"
    _training_job(aws, name, TRAINED)
    state = {
        "train_data": f"s3://{BUCKET}/datasets/guanaco/",
        "run": {"name": name, "hyperparameters": {}},
        "training": {"job_name": name, "model_s3_uri": f"s3://{BUCKET}/models/{name}/output/model/"},
    }
    execution, events = run_execution(aws, aws["machine"], state, name)
    assert execution["status"] == "FAILED" and "RegisterModel" not in entered(events)
    assert entered(events)[-2:] == ["ReadModelFacts", "Notify"]


def test_the_recorded_create_model_package_request_is_within_botocore_limits(aws):
    _, events = _run(aws, "llm-inf2-dev-request-0-0", TRAINED)
    (scheduled,) = [
        e["taskScheduledEventDetails"]
        for e in events
        if e["type"] == "TaskScheduled" and e["taskScheduledEventDetails"]["resource"] == "createModelPackage"
    ]
    request = json.loads(scheduled["parameters"])
    model = botocore.session.get_session().get_service_model("sagemaker")
    report = ParamValidator().validate(request, model.operation_model("CreateModelPackage").input_shape)
    assert not report.has_errors(), report.generate_report()
    assert limit_violations("sagemaker", "CreateModelPackage", request) == []


def test_limit_check_catches_what_paramvalidator_lets_through():
    """The check above can fail: a metadata value with JSON in it, or over 256 characters."""
    bad = {
        "ModelPackageGroupName": "g",
        "CustomerMetadataProperties": {"hyperparameters": '{"a": "1"}', "long": "x" * 257},
    }
    found = limit_violations("sagemaker", "CreateModelPackage", bad)
    assert any("hyperparameters" in f for f in found) and any("long" in f for f in found), found
