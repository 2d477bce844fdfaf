"""The typed CreateTrainingJob builder on its own (no synth): run-time values, spot, VPC, invariants."""

from __future__ import annotations

import pytest

from stacks.shared.job_access import JobImage, S3Scope
from stacks.shared.job_request import Ref, S3Channel, TrainingJobRequest
from stacks.training.workflow import MAX_JOB_NAME, max_job_name_length

BUCKET = "arn:aws:s3:::bucket"
DATASETS = S3Scope(BUCKET, "datasets/", "the dataset is chosen per execution")
MODELS = S3Scope(BUCKET, "models/", "job names are generated per execution")
BASE_MODELS = S3Scope(BUCKET, "base-models/", "an uploaded base model")
CHECKPOINTS = S3Scope(BUCKET, "checkpoints/", "the run name is generated per execution")


def _request(**overrides) -> TrainingJobRequest:
    fields = {
        "job_name": Ref("$.run.job_name"),
        "role_arn": "arn:aws:iam::123456789012:role/training",
        "image": JobImage(
            "763104351884.dkr.ecr.us-east-1.amazonaws.com/huggingface-pytorch-training:x",
            "arn:aws:ecr:us-east-1:763104351884:repository/huggingface-pytorch-training",
        ),
        "instance_type": "ml.g5.2xlarge",
        "instance_count": 1,
        "volume_size_gb": 100,
        "kms_key_arn": "arn:aws:kms:us-east-1:123456789012:key/k",
        "output_s3_uri": "s3://bucket/models/",
        "output_scope": MODELS,
        "hyperparameters": Ref("$.run.hyperparameters"),
        "channels": [S3Channel("training", Ref("$.train_data"), DATASETS)],
        "max_runtime_seconds": 3600,
        "metric_definitions": [{"Name": "train_loss", "Regex": "train_loss=([0-9.]+)"}],
    }
    return TrainingJobRequest(**{**fields, **overrides})


def test_run_time_values_get_the_dollar_suffix():
    asl = _request().to_asl()
    assert asl["TrainingJobName.$"] == "$.run.job_name" and "TrainingJobName" not in asl
    assert asl["HyperParameters.$"] == "$.run.hyperparameters"
    assert asl["InputDataConfig"] == [
        {
            "ChannelName": "training",
            "DataSource": {
                "S3DataSource": {
                    "S3DataType": "S3Prefix",
                    "S3DataDistributionType": "FullyReplicated",
                    "S3Uri.$": "$.train_data",
                }
            },
            "InputMode": "File",
        }
    ]


def test_on_demand_job_has_kms_everywhere_and_no_spot():
    asl = _request().to_asl()
    assert asl["OutputDataConfig"] == {
        "S3OutputPath": "s3://bucket/models/",
        "KmsKeyId": "arn:aws:kms:us-east-1:123456789012:key/k",
        "CompressionType": "NONE",
    }
    assert asl["ResourceConfig"]["VolumeKmsKeyId"] == "arn:aws:kms:us-east-1:123456789012:key/k"
    assert asl["StoppingCondition"] == {"MaxRuntimeInSeconds": 3600}
    assert "EnableManagedSpotTraining" not in asl and "CheckpointConfig" not in asl and "VpcConfig" not in asl
    assert asl["EnableInterContainerTrafficEncryption"] is True


def test_spot_job_waits_and_checkpoints():
    asl = _request(
        max_wait_seconds=7200,
        checkpoint_s3_uri=Ref("States.Format('s3://b/checkpoints/{}/', $.run.name)"),
        checkpoint_scope=CHECKPOINTS,
    ).to_asl()
    assert asl["EnableManagedSpotTraining"] is True
    assert asl["StoppingCondition"] == {"MaxRuntimeInSeconds": 3600, "MaxWaitTimeInSeconds": 7200}
    assert asl["CheckpointConfig"] == {
        "LocalPath": "/opt/ml/checkpoints",
        "S3Uri.$": "States.Format('s3://b/checkpoints/{}/', $.run.name)",
    }


def test_isolated_job_in_a_vpc_with_a_model_channel():
    asl = _request(
        network_isolation=True,
        channels=[
            S3Channel("training", Ref("$.train_data"), DATASETS),
            S3Channel("model", "s3://b/base-models/llama/", BASE_MODELS),
        ],
        subnet_ids=["subnet-0123456789abcdef0"],
        security_group_ids=["sg-0123456789abcdef0"],
        tags={"env": "dev"},
    ).to_asl()
    assert asl["EnableNetworkIsolation"] is True
    assert asl["InputDataConfig"][1]["DataSource"]["S3DataSource"]["S3Uri"] == "s3://b/base-models/llama/"
    assert asl["VpcConfig"] == {"Subnets": ["subnet-0123456789abcdef0"], "SecurityGroupIds": ["sg-0123456789abcdef0"]}
    assert asl["Tags"] == [{"Key": "env", "Value": "dev"}]


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"max_wait_seconds": 60}, "max_wait_seconds must be >= max_runtime_seconds"),
        ({"max_wait_seconds": 7200}, "needs a checkpoint location"),
        ({"subnet_ids": ["subnet-1"]}, "needs subnets and security groups"),
        (
            {"channels": [S3Channel("training", "s3://a/", DATASETS), S3Channel("training", "s3://b/", DATASETS)]},
            "duplicate channel",
        ),
    ],
)
def test_invalid_requests_are_refused(overrides, message):
    with pytest.raises(ValueError, match=message):
        _request(**overrides)


def test_refs_must_be_paths_or_intrinsics():
    with pytest.raises(ValueError, match="not a JSONPath"):
        Ref("train_data")


def test_job_names_fit_sagemaker_for_the_longest_allowed_prefix():
    assert max_job_name_length("a" * 26) == MAX_JOB_NAME


# What Step Functions substitutes for each run-time value (`Key.$`), in the form the API expects there.
RUN_TIME_VALUES = {
    "TrainingJobName": "llm-inf2-dev-0123456789abcdef0123456789abcdef-0-0",
    "S3Uri": "s3://bucket/datasets/guanaco/",
    "S3OutputPath": "s3://bucket/models/",
    "HyperParameters": {"epochs": "1"},
}


def _as_sent(node):
    """The Parameters as the service receives them: every `Key.$` replaced by a value of Key."""
    if isinstance(node, list):
        return [_as_sent(item) for item in node]
    if not isinstance(node, dict):
        return node
    return {
        (key[:-2] if key.endswith(".$") else key): RUN_TIME_VALUES[key[:-2]] if key.endswith(".$") else _as_sent(value)
        for key, value in node.items()
    }


@pytest.mark.parametrize(
    "overrides",
    [
        {},
        {
            "max_wait_seconds": 7200,
            "checkpoint_s3_uri": Ref("States.Format('s3://b/checkpoints/{}/', $.run.name)"),
            "checkpoint_scope": CHECKPOINTS,
            "network_isolation": True,
            "channels": [
                S3Channel("training", Ref("$.train_data"), DATASETS),
                S3Channel("model", "s3://b/base-models/llama/", BASE_MODELS),
            ],
            "subnet_ids": ["subnet-0123456789abcdef0"],
            "security_group_ids": ["sg-0123456789abcdef0"],
            "tags": {"env": "dev", "app": "llm-inf2"},
            "hyperparameters": {"epochs": "1"},
            "container_entrypoint": ["python", "compile.py"],
            "container_arguments": ["--batch_size", "4"],
        },
    ],
    ids=["on-demand", "every-option"],
)
def test_the_request_is_one_createtrainingjob_accepts(overrides):
    """botocore's own validation (types, required members, enums) and the maxima and patterns it skips."""
    from botocore.validate import ParamValidator

    from tests.stacks.botocore_limits import input_shape, limit_violations

    params = _as_sent(_request(**overrides).to_asl())
    report = ParamValidator().validate(params, input_shape("sagemaker", "CreateTrainingJob"))
    assert not report.has_errors(), report.generate_report()
    assert limit_violations("sagemaker", "CreateTrainingJob", params) == []
    assert params["AlgorithmSpecification"]["TrainingInputMode"] == "File"
    if overrides:
        assert params["Tags"] == [{"Key": "app", "Value": "llm-inf2"}, {"Key": "env", "Value": "dev"}]
        assert params["AlgorithmSpecification"]["ContainerArguments"] == ["--batch_size", "4"]
        assert params["HyperParameters"] == {"epochs": "1"}


def test_the_task_resource_is_the_documented_sync_integration():
    """Step Functions' optimized SageMaker integration: `arn:<partition>:states:::sagemaker:createTrainingJob.sync`."""
    from stacks.shared.job_request import CREATE_TRAINING_JOB_SYNC

    assert CREATE_TRAINING_JOB_SYNC.format(partition="aws-us-gov") == (
        "arn:aws-us-gov:states:::sagemaker:createTrainingJob.sync"
    )


def test_a_request_and_its_channels_cannot_be_changed_after_the_checks():
    """The invariants hold only because nobody can change a field after __post_init__ checked it."""
    import dataclasses

    request = _request()
    with pytest.raises(dataclasses.FrozenInstanceError):
        request.max_wait_seconds = 60
    with pytest.raises(dataclasses.FrozenInstanceError):
        request.channels[0].name = "model"


def test_an_unset_option_leaves_the_job_on_sagemaker_defaults():
    """No environment (the image's own), no isolation, no VPC, no tags, no entrypoint: nothing sent for them."""
    asl = _request().to_asl()
    assert asl["EnableNetworkIsolation"] is False
    assert set(asl) == {
        "TrainingJobName.$",
        "RoleArn",
        "AlgorithmSpecification",
        "HyperParameters.$",
        "InputDataConfig",
        "OutputDataConfig",
        "ResourceConfig",
        "StoppingCondition",
        "EnableNetworkIsolation",
        "EnableInterContainerTrafficEncryption",
    }
    assert set(asl["AlgorithmSpecification"]) == {"TrainingImage", "TrainingInputMode", "MetricDefinitions"}


def test_the_container_environment_is_sent_as_given():
    asl = _request(environment={"NEURON_CC_FLAGS": "--model-type=transformer"}).to_asl()
    assert asl["Environment"] == {"NEURON_CC_FLAGS": "--model-type=transformer"}


def test_a_spot_wait_as_long_as_the_runtime_is_accepted():
    """CreateTrainingJob needs MaxWaitTimeInSeconds >= MaxRuntimeInSeconds: equal is allowed."""
    asl = _request(
        max_wait_seconds=3600, checkpoint_s3_uri="s3://b/checkpoints/", checkpoint_scope=CHECKPOINTS
    ).to_asl()
    assert asl["StoppingCondition"] == {"MaxRuntimeInSeconds": 3600, "MaxWaitTimeInSeconds": 3600}


@pytest.mark.parametrize(
    ("overrides", "line"),
    [
        ({"max_wait_seconds": 60}, "max_wait_seconds must be >= max_runtime_seconds"),
        (
            {"max_wait_seconds": 7200},
            "managed spot training needs a checkpoint location to resume after an interruption",
        ),
        ({"security_group_ids": ["sg-1"]}, "a VPC config needs subnets and security groups"),
        (
            {"channels": [S3Channel("training", "s3://a/", DATASETS), S3Channel("training", "s3://b/", DATASETS)]},
            "duplicate channel names ['training', 'training']",
        ),
    ],
)
def test_each_refusal_is_its_whole_line(overrides, line):
    with pytest.raises(ValueError) as refused:
        _request(**overrides)
    assert str(refused.value) == line


def test_a_plain_string_ref_is_refused_with_its_whole_line():
    with pytest.raises(ValueError) as refused:
        Ref("train_data")
    assert str(refused.value) == "not a JSONPath or intrinsic function: 'train_data'"
