"""Every bounded config setting at its edges: accepted at the edge, refused one past it with its one-line error.

The settings come from the schema itself (every field of every section reachable from AppConfig), so a new one
without an entry in EDGES fails `test_every_bounded_setting_has_its_edges`. The expected limits come from
botocore's own loader (tests/stacks/botocore_limits.py, not stacks/config's reader) or from the documented reason
written next to them, never from the code under test. Sections are parsed directly (no app run, no synth).
"""

from __future__ import annotations

import dataclasses
import math
import re
import types
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import pytest
import yaml

from stacks.config import ConfigError
from stacks.config.app_config import AppConfig
from stacks.config.schema import describe, parse
from tests.stacks.botocore_limits import input_shape

ROOT = Path(__file__).resolve().parents[3]
SOURCE = "edge.yaml"
_DEV = yaml.safe_load((ROOT / "config" / "dev.yaml").read_text())


# -- the schema's own list of settings --------------------------------------------------------------------------
def _inner(tp: Any) -> list[Any]:
    if typing.get_origin(tp) in (typing.Union, types.UnionType):
        return [a for a in typing.get_args(tp) if a is not type(None)]
    return [tp]


def sections() -> dict[type, str]:
    """Every section class reachable from AppConfig, with the first path it is found at."""
    found: dict[type, str] = {}

    def walk(cls: type, path: str) -> None:
        if cls in found:
            return
        found[cls] = path
        hints = typing.get_type_hints(cls)
        for f in dataclasses.fields(cls):
            for tp in _inner(hints[f.name]):
                if dataclasses.is_dataclass(tp):
                    walk(tp, f"{path}.{f.name}" if path else f.name)

    walk(AppConfig, "")
    return found


def _bounded(meta: typing.Mapping[str, Any], tp: Any) -> bool:
    if typing.get_origin(tp) is Literal or tp in (int, float):
        return True
    return any(meta.get(key) for key in ("pattern", "key_pattern", "aws"))


# Set from config/<env>.model.json only (served_model.with_model); typed into a YAML file they are refused whatever
# the value (tests/stacks/config/test_served_model.py), so they have no edges to accept.
FROM_THE_LOCK = {"ServingConfig.model_prefix", "ServingConfig.compiled_graph_prefix"}


def bounded_settings() -> dict[str, tuple[type, str, str, Any]]:
    """`Section.field` -> (section, field, its path, its type) for each setting with a limit of any kind."""
    found = {}
    for cls, path in sections().items():
        hints = typing.get_type_hints(cls)
        for f in dataclasses.fields(cls):
            tp = _inner(hints[f.name])[0]
            if f"{cls.__name__}.{f.name}" in FROM_THE_LOCK:
                continue
            if f.init and not dataclasses.is_dataclass(tp) and tp is not bool and _bounded(f.metadata, tp):
                found[f"{cls.__name__}.{f.name}"] = (cls, f.name, f"{path}.{f.name}" if path else f.name, tp)
    return found


# -- botocore: the oracle --------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Api:
    """A request member, walked by member names from the operation's input with botocore's own loader. `label` is
    how the error line must name it; documented_* are limits AWS states in the member's documentation (`quote`)."""

    service: str
    operation: str
    members: str
    label: str
    per_unit: int = 1
    documented_min: int | None = None
    documented_max: int | None = None
    quote: str = ""

    def shape(self):
        shape = input_shape(self.service, self.operation)
        for name in self.members.split("."):
            while shape.type_name == "list":
                shape = shape.member
            shape = shape.members[name]
        return shape

    def documentation(self) -> str:
        parent = input_shape(self.service, self.operation)
        *path, last = self.members.split(".")
        for name in path:
            while parent.type_name == "list":
                parent = parent.member
            parent = parent.members[name]
        while parent.type_name == "list":
            parent = parent.member
        return re.sub(r"<[^>]+>", "", parent.members[last].documentation)

    def api_range(self) -> tuple[int | None, int | None]:
        low, high = self.shape().metadata.get("min"), self.shape().metadata.get("max")
        if self.documented_min is not None:
            low = self.documented_min if low is None else max(low, self.documented_min)
        if self.documented_max is not None:
            high = self.documented_max if high is None else min(high, self.documented_max)
        return low, high

    @property
    def low(self) -> int:
        """The least whole setting unit the API accepts."""
        return math.ceil(self.api_range()[0] / self.per_unit)

    @property
    def high(self) -> int:
        return math.floor(self.api_range()[1] / self.per_unit)

    def note(self) -> str:
        low, high = self.api_range()
        unit = {"string": " characters", "list": " items"}.get(self.shape().type_name, "")
        span = "" if low is None and high is None else f": {'' if low is None else low}..{'' if high is None else high}"
        return f"({self.label}{span}{unit if span else ''}"


def _sm(operation: str, members: str, label: str, **kw) -> Api:
    return Api("sagemaker", operation, members, f"SageMaker {operation} {label}", **kw)


VARIANT = "ProductionVariants"
INITIAL_COUNT = _sm("CreateEndpointConfig", f"{VARIANT}.InitialInstanceCount", "ProductionVariant.InitialInstanceCount")
VARIANT_VOLUME = _sm("CreateEndpointConfig", f"{VARIANT}.VolumeSizeInGB", "ProductionVariant.VolumeSizeInGB")
STARTUP = _sm(
    "CreateEndpointConfig",
    f"{VARIANT}.ContainerStartupHealthCheckTimeoutInSeconds",
    "ProductionVariant.ContainerStartupHealthCheckTimeoutInSeconds",
)
DOWNLOAD = _sm(
    "CreateEndpointConfig",
    f"{VARIANT}.ModelDataDownloadTimeoutInSeconds",
    "ProductionVariant.ModelDataDownloadTimeoutInSeconds",
)
SAMPLING = _sm(
    "CreateEndpointConfig", "DataCaptureConfig.InitialSamplingPercentage", "DataCaptureConfig.InitialSamplingPercentage"
)
ROLLING = "DeploymentConfig.RollingUpdatePolicy"
BLUE_GREEN = "DeploymentConfig.BlueGreenUpdatePolicy"
BATCH = _sm(
    "CreateEndpoint",
    f"{ROLLING}.MaximumBatchSize.Value",
    "RollingUpdatePolicy.MaximumBatchSize.Value",
    documented_min=5,
)
ROLLBACK = _sm(
    "CreateEndpoint", f"{ROLLING}.RollbackMaximumBatchSize.Value", "RollingUpdatePolicy.RollbackMaximumBatchSize.Value"
)
WAIT = _sm("CreateEndpoint", f"{ROLLING}.WaitIntervalInSeconds", "RollingUpdatePolicy.WaitIntervalInSeconds")
EXECUTION = _sm(
    "CreateEndpoint",
    f"{ROLLING}.MaximumExecutionTimeoutInSeconds",
    "RollingUpdatePolicy.MaximumExecutionTimeoutInSeconds",
)
CANARY = _sm(
    "CreateEndpoint",
    f"{BLUE_GREEN}.TrafficRoutingConfiguration.CanarySize.Value",
    "TrafficRoutingConfig.CanarySize.Value",
    documented_max=50,
)
TERMINATION = _sm(
    "CreateEndpoint", f"{BLUE_GREEN}.TerminationWaitInSeconds", "BlueGreenUpdatePolicy.TerminationWaitInSeconds"
)
JOB_COUNT = _sm("CreateTrainingJob", "ResourceConfig.InstanceCount", "ResourceConfig.InstanceCount")
JOB_VOLUME = _sm("CreateTrainingJob", "ResourceConfig.VolumeSizeInGB", "ResourceConfig.VolumeSizeInGB")
DAYS_28 = 28 * 86400  # MaxRuntimeInSeconds' documentation: "The maximum value is 28 days."
RUNTIME_HOURS = _sm(
    "CreateTrainingJob",
    "StoppingCondition.MaxRuntimeInSeconds",
    "StoppingCondition.MaxRuntimeInSeconds",
    per_unit=3600,
    documented_max=DAYS_28,
    quote="The maximum value is 28 days.",
)
TRIAL_MINUTES = _sm(
    "CreateHyperParameterTuningJob",
    "TrainingJobDefinition.StoppingCondition.MaxRuntimeInSeconds",
    "StoppingCondition.MaxRuntimeInSeconds",
    per_unit=60,
    documented_max=DAYS_28,
    quote="The maximum value is 28 days.",
)
WAIT_HOURS = _sm(
    "CreateTrainingJob",
    "StoppingCondition.MaxWaitTimeInSeconds",
    "StoppingCondition.MaxWaitTimeInSeconds",
    per_unit=3600,
)
TUNING = "HyperParameterTuningJobConfig.ResourceLimits"
# https://docs.aws.amazon.com/sagemaker/latest/dg/automatic-model-tuning-limits.html: 750 training jobs per tuning
# job, parallel ones 10 by default and at most 100.
MAX_JOBS = _sm(
    "CreateHyperParameterTuningJob",
    f"{TUNING}.MaxNumberOfTrainingJobs",
    "ResourceLimits.MaxNumberOfTrainingJobs",
    documented_max=750,
)
PARALLEL_JOBS = _sm(
    "CreateHyperParameterTuningJob",
    f"{TUNING}.MaxParallelTrainingJobs",
    "ResourceLimits.MaxParallelTrainingJobs",
    documented_max=100,
)
TRAINING_IMAGE = _sm(
    "CreateTrainingJob", "AlgorithmSpecification.TrainingImage", "AlgorithmSpecification.TrainingImage"
)
MODEL_IMAGE = _sm("CreateModel", "PrimaryContainer.Image", "ContainerDefinition.Image")
JOB_SUBNETS = _sm("CreateTrainingJob", "VpcConfig.Subnets", "VpcConfig.Subnets")
JOB_GROUPS = _sm("CreateTrainingJob", "VpcConfig.SecurityGroupIds", "VpcConfig.SecurityGroupIds")
MODEL_SUBNETS = _sm("CreateModel", "VpcConfig.Subnets", "VpcConfig.Subnets")
MODEL_GROUPS = _sm("CreateModel", "VpcConfig.SecurityGroupIds", "VpcConfig.SecurityGroupIds")
TAG_KEY = _sm("CreateTrainingJob", "Tags.Key", "Tag.Key")
TAG_VALUE = _sm("CreateTrainingJob", "Tags.Value", "Tag.Value")
PERIOD = Api("cloudwatch", "PutMetricAlarm", "Period", "CloudWatch PutMetricAlarm Period")
EVALUATIONS = Api("cloudwatch", "PutMetricAlarm", "EvaluationPeriods", "CloudWatch PutMetricAlarm EvaluationPeriods")
DATAPOINTS = Api("cloudwatch", "PutMetricAlarm", "DatapointsToAlarm", "CloudWatch PutMetricAlarm DatapointsToAlarm")
THRESHOLD = Api("cloudwatch", "PutMetricAlarm", "Threshold", "CloudWatch PutMetricAlarm Threshold")
# The idle alarm's one-minute periods: Period's documentation bounds a sub-hour alarm's window to one day.
ONE_DAY_WINDOW = "the total evaluation period can't be longer than one day (86,400 seconds)."
IDLE_PERIODS = Api(
    "cloudwatch",
    "PutMetricAlarm",
    "EvaluationPeriods",
    "CloudWatch PutMetricAlarm EvaluationPeriods",
    documented_max=86400 // 60,
)
_AAS = "Application Auto Scaling"
MIN_CAPACITY = Api(
    "application-autoscaling", "RegisterScalableTarget", "MinCapacity", f"{_AAS} RegisterScalableTarget MinCapacity"
)
MAX_CAPACITY = Api(
    "application-autoscaling", "RegisterScalableTarget", "MaxCapacity", f"{_AAS} RegisterScalableTarget MaxCapacity"
)
_TRACKING = "TargetTrackingScalingPolicyConfiguration"
TARGET = Api(
    "application-autoscaling",
    "PutScalingPolicy",
    f"{_TRACKING}.TargetValue",
    f"{_AAS} PutScalingPolicy {_TRACKING}.TargetValue",
)
SCALE_IN = Api(
    "application-autoscaling",
    "PutScalingPolicy",
    f"{_TRACKING}.ScaleInCooldown",
    f"{_AAS} PutScalingPolicy {_TRACKING}.ScaleInCooldown",
)
SCALE_OUT = Api(
    "application-autoscaling",
    "PutScalingPolicy",
    f"{_TRACKING}.ScaleOutCooldown",
    f"{_AAS} PutScalingPolicy {_TRACKING}.ScaleOutCooldown",
)
_RULES = "LifecycleConfiguration.Rules"
_LIFECYCLE = "S3 PutBucketLifecycleConfiguration"
_POSITIVE = "The value must be a non-zero positive integer."
NONCURRENT = Api(
    "s3",
    "PutBucketLifecycleConfiguration",
    f"{_RULES}.NoncurrentVersionExpiration.NoncurrentDays",
    f"{_LIFECYCLE} NoncurrentVersionExpiration.NoncurrentDays",
    documented_min=1,
    quote=_POSITIVE,
)
EXPIRATION = Api(
    "s3",
    "PutBucketLifecycleConfiguration",
    f"{_RULES}.Expiration.Days",
    f"{_LIFECYCLE} LifecycleExpiration.Days",
    documented_min=1,
    quote=_POSITIVE,
)
ABORT = Api(
    "s3",
    "PutBucketLifecycleConfiguration",
    f"{_RULES}.AbortIncompleteMultipartUpload.DaysAfterInitiation",
    f"{_LIFECYCLE} AbortIncompleteMultipartUpload.DaysAfterInitiation",
)


# -- what each setting's edges are, and why -----------------------------------------------------------------------
@dataclass(frozen=True)
class Range:
    """A number setting: `low`..`high` both accepted, one past either refused. `api`: the field it is sent as."""

    low: float
    high: float
    why: str
    api: Api | None = None
    context: dict[str, Any] = field(default_factory=dict)  # other settings the edges need (cross-field rules)


@dataclass(frozen=True)
class Choice:
    """A Literal setting: each of `values` accepted, `refused` not."""

    values: tuple
    refused: Any
    why: str
    api: Api | None = None


@dataclass(frozen=True)
class Listed:
    """A number setting that takes one of a documented list (test_log_retention_is_cloudwatch_logs_documented_list)."""

    why: str


@dataclass(frozen=True)
class Text:
    """A string (list, mapping) setting: `accepted` parse, each of `refused` fails with `fragment` in its line."""

    accepted: tuple
    refused: tuple[tuple[Any, str], ...]
    why: str
    api: Api | None = None
    context: dict[str, Any] = field(default_factory=dict)


ECR = "123456789012.dkr.ecr.us-east-1.amazonaws.com"
SUBNETS = [f"subnet-{i:017x}" for i in range(1, 18)]
GROUPS = [f"sg-{i:017x}" for i in range(1, 7)]
MUST_MATCH = "must match "
SECRET_NAME = "llm-inf2/hub-token"
KMS_KEY = "arn:aws:kms:us-east-1:123456789012:key/"
# The job is given the secret's ARN as a CreateTrainingJob Environment value, botocore's TrainingEnvironmentValue.
ENVIRONMENT_VALUE_MAX = input_shape("sagemaker", "CreateTrainingJob").members["Environment"].value.metadata["max"]


def _secret(name: str) -> str:
    """A secret's ARN as Secrets Manager writes it: its name, a hyphen and six characters of its own."""
    return f"arn:aws:secretsmanager:us-east-1:123456789012:secret:{name}-AbC123"


MODEL_KEY = "pruning/run/base/model.tar.gz"
ISOLATED_VPC = {"isolated": True, "vpc_id": "vpc-0123456789abcdef0"}


def _image(length: int, base: str = f"{ECR}/r:") -> str:
    return base + "t" * (length - len(base))


TRAINING_NAME = _sm("CreateTrainingJob", "TrainingJobName", "TrainingJobName")
TUNING_NAME = _sm("CreateHyperParameterTuningJob", "HyperParameterTuningJobName", "HyperParameterTuningJobName")
# `<prefix>-<32 hex>-<attempt>-<retry>` and `<prefix>-<17-digit start time>-<retry>` (the workflows' names)
JOB_NAME_MAX, TUNING_NAME_MAX = TRAINING_NAME.shape().metadata["max"], TUNING_NAME.shape().metadata["max"]
JOB_PREFIX, TUNING_PREFIX = JOB_NAME_MAX - (1 + 32 + 4), TUNING_NAME_MAX - (1 + 17 + 2)
PERCENT = "a share of 100%"
ENCODER = {"supernet_hyperparameters": {"model-name-or-path": "org/encoder"}}  # dimensions of an unknown model
LOG_RETENTION = Listed("CloudWatch Logs' documented retention periods")

EDGES: dict[str, Range | Choice | Listed | Text] = {
    # AppConfig
    "AppConfig.app_name": Text(
        ("ab", "a" + "b" * 23, "llm-inf2"),
        (("a", MUST_MATCH), ("a" + "b" * 24, MUST_MATCH), ("Llm", MUST_MATCH), ("1ab", MUST_MATCH)),
        "lower-case stack and bucket name prefix of 2..24 characters starting with a letter",
    ),
    "AppConfig.account": Text(
        ("123456789012",), (("12345678901", MUST_MATCH), ("1234567890123", MUST_MATCH)), "AWS account ids: 12 digits"
    ),
    "AppConfig.region": Text(
        ("us-east-1", "us-gov-west-1", "cn-north-1"), (("Mars-1", MUST_MATCH), ("us-east", MUST_MATCH)), "region names"
    ),
    "AppConfig.tags": Text(
        ({"k": "v"}, {"a" * 128: "b" * 256}),
        (
            ({"a" * 129: "v"}, "must match"),
            ({"k": "b" * 257}, MUST_MATCH),
            ({"k": ""}, MUST_MATCH),
            ({"aws:k": "v"}, "must match"),
            ({"k": "a|b"}, MUST_MATCH),
        ),
        "SageMaker's Tag: keys 1..128, values ..256 characters; values not empty (CloudFormation), no aws: keys",
        api=TAG_VALUE,
    ),
    # DataConfig: S3 documents only a positive integer; the caps are the project's
    "DataConfig.noncurrent_version_expiration_days": Range(
        NONCURRENT.low, 3650, "ten years of old versions at most", NONCURRENT
    ),
    "DataConfig.abort_incomplete_multipart_upload_days": Range(
        1, 365, "a day to a year for an unfinished upload", ABORT
    ),
    "DataConfig.access_log_expiration_days": Range(30, 3650, "a month to ten years of access logs", EXPIRATION),
    # TrainingConfig
    "TrainingConfig.instance_type": Text(
        ("ml.g5.2xlarge",),
        (("g5.2xlarge", MUST_MATCH), ("ml.g5.3xlarge", "not a SageMaker TrainingInstanceType")),
        "TrainingInstanceType's enum",
    ),
    "TrainingConfig.instance_count": Range(
        JOB_COUNT.low + 1, 8, "at least one instance (0 is for instance groups); 8: a typo guard", JOB_COUNT
    ),
    "TrainingConfig.volume_size_gb": Range(5, 16384, "5 GB to the 16 TiB of one EBS gp2 volume", JOB_VOLUME),
    "TrainingConfig.max_runtime_hours": Range(RUNTIME_HOURS.low, RUNTIME_HOURS.high, "SageMaker's", RUNTIME_HOURS),
    "TrainingConfig.max_wait_hours": Range(
        WAIT_HOURS.low, 672, "capped like the run time (28 days)", WAIT_HOURS, {"spot": True, "max_runtime_hours": 1}
    ),
    "TrainingConfig.base_model_key": Text(
        ("base-models/llama/",), (("models/llama/", MUST_MATCH), ("base-models/llama", MUST_MATCH)), "a folder"
    ),
    "TrainingConfig.hub_token_secret": Text(
        (_secret(SECRET_NAME), _secret("n" * (ENVIRONMENT_VALUE_MAX - len(_secret("")))), _secret("a/b_c+d=e.f@g-h")),
        (
            (_secret("n" * (ENVIRONMENT_VALUE_MAX - len(_secret("")) + 1)), f"at most {ENVIRONMENT_VALUE_MAX} "),
            (_secret(SECRET_NAME).removesuffix("-AbC123"), MUST_MATCH),  # a partial ARN: IAM would match no secret
            ("llm-inf2/hub-token", MUST_MATCH),  # a name: the role is granted an ARN
        ),
        "the secret's full ARN, as the job's Environment value (SageMaker's TrainingEnvironmentValue maximum)",
        Api("secretsmanager", "GetSecretValue", "SecretId", "Secrets Manager GetSecretValue SecretId"),
    ),
    "TrainingConfig.hub_token_kms_key": Text(
        (f"{KMS_KEY}1234abcd-12ab-34cd-56ef-1234567890ab", f"{KMS_KEY}mrk-{'0' * 32}"),
        (("alias/aws/secretsmanager", MUST_MATCH), (f"{KMS_KEY}1234abcd", MUST_MATCH)),
        "the key's ARN: IAM grants Decrypt on a key, never on an alias",
        Api("secretsmanager", "CreateSecret", "KmsKeyId", "Secrets Manager CreateSecret KmsKeyId"),
        {"hub_token_secret": _secret(SECRET_NAME)},
    ),
    "TrainingConfig.subnet_ids": Text(
        (SUBNETS[:16],),
        ((SUBNETS, "got 17 items; at most 16"), (["vpc-123"], MUST_MATCH)),
        "botocore's VpcConfig.Subnets maximum; EC2 subnet ids",
        JOB_SUBNETS,
        {"security_group_ids": GROUPS[:1]},
    ),
    "TrainingConfig.security_group_ids": Text(
        (GROUPS[:5],),
        ((GROUPS, "got 6 items; at most 5"), (["sg-12"], MUST_MATCH)),
        "botocore's VpcConfig.SecurityGroupIds maximum; EC2 security group ids",
        JOB_GROUPS,
        {"subnet_ids": SUBNETS[:1]},
    ),
    "TrainingConfig.image_uri": Text(
        (_image(255), f"{ECR}/r@sha256:{'0' * 64}"),
        ((_image(256), "got 256 characters; at most 255"), ("docker.io/library/pytorch:latest", MUST_MATCH)),
        "an ECR image, at most botocore's TrainingImage length",
        TRAINING_IMAGE,
    ),
    "TrainingConfig.image_repository": Text(
        ("llm-inf2-training:qlora-1", f"r@sha256:{'a' * 64}"),
        (("llm-inf2-training", MUST_MATCH), (f"r@sha256:{'a' * 65}", MUST_MATCH)),
        "<repo>:<tag> or <repo>@sha256:<64 hex>",
    ),
    "TrainingConfig.job_name_prefix": Text(
        ("a", "a" * JOB_PREFIX),
        (
            (
                "a" * (JOB_PREFIX + 1),
                f"at most {JOB_PREFIX} characters so job names fit SageMaker's {JOB_NAME_MAX} " + TRAINING_NAME.note(),
            ),
            ("A1", MUST_MATCH),
        ),
        "job names fit TrainingJobName; lower-case",
    ),
    "TrainingConfig.capacity_retries": Range(0, 5, "project: new jobs after an InsufficientCapacity failure"),
    "TrainingConfig.capacity_backoff_seconds": Range(
        60, 7200, "project: the first capacity wait (Step Functions Wait)"
    ),
    "TrainingConfig.log_retention_days": LOG_RETENTION,
    "NeuronCompileConfig.instance_type": Text(("ml.r5.4xlarge",), (("ml.r5.5xlarge", "not a SageMaker"),), "enum"),
    "NeuronCompileConfig.max_runtime_hours": Range(
        RUNTIME_HOURS.low, 72, "a compile takes an hour or two", RUNTIME_HOURS
    ),
    "NeuronCompileConfig.volume_size_gb": Range(5, 16384, "5 GB to the 16 TiB of one EBS gp2 volume", JOB_VOLUME),
    "QualityGateConfig.min_improvement": Range(-10.0, 10.0, "eval loss in nats: far beyond any real change"),
    "QualityGateConfig.max_benchmark_drop": Range(0.0, 100.0, "points of a score in 0..1: none of it to all of it"),
    "BenchmarkConfig.tasks": Text(
        (["arc_easy", "hellaswag", "mmlu_high_school_physics"], ["everyday_facts"]),
        ((["arc easy"], MUST_MATCH), (["../arc_easy"], MUST_MATCH)),
        "lm-eval task names, each a folder name under the staged prefix",
    ),
    "BenchmarkConfig.staged_prefix": Text(
        ("eval-data/", "benchmarks/staged/"), (("eval-data", MUST_MATCH), ("/eval-data/", MUST_MATCH)), "an S3 folder"
    ),
    "BenchmarkConfig.instance_type": Text(("ml.g5.xlarge",), (("ml.g5.5xlarge", "not a SageMaker"),), "enum"),
    "BenchmarkConfig.max_runtime_hours": Range(
        RUNTIME_HOURS.low, 72, "project: two models on a few benchmarks take hours", RUNTIME_HOURS
    ),
    "BenchmarkConfig.volume_size_gb": Range(5, 16384, "5 GB to the 16 TiB of one EBS gp2 volume", JOB_VOLUME),
    # ServingConfig (dev: LMI NeuronX)
    "ServingConfig.model_name": Text(
        ("tinyllama-1.1b-chat", "mistral-7b-instruct"), (("Tiny", MUST_MATCH),), "a name; no folder of its own"
    ),
    # scale to zero off: a trillion parameters fit no ml.inf2.xlarge copy (test_scale_to_zero_config.py)
    "ServingConfig.model_parameters_billions": Range(
        1e-9, 1000, "from a record: one parameter to a trillion", context={"scale_to_zero": {"enabled": False}}
    ),
    "ServingConfig.backend": Choice(("lmi_neuronx",), "tgi", "stacks/serving/backends/ (vllm_neuronx: staging)"),
    "ServingConfig.image": Choice(("lmi_neuronx", "lmi_neuronx_0_29"), "vllm", "stacks/images.json's LMI entries"),
    "ServingConfig.image_uri": Text(
        (_image(255, f"{ECR}/djl-inference:0.30.0-neuronx"),),
        ((_image(256, f"{ECR}/djl-inference:0.30.0-neuronx"), "got 256 characters; at most 255"),),
        "an ECR image, at most botocore's ContainerDefinition.Image length",
        MODEL_IMAGE,
    ),
    "ServingConfig.lmi_version": Text(("0.30.0",), (("0.30", MUST_MATCH),), "a release number"),
    "ServingConfig.instance_type": Text(
        ("ml.inf2.xlarge", "ml.inf2.48xlarge"),
        (("inf2.xlarge", MUST_MATCH), ("ml.g5.2xlarge", "Inferentia2")),
        "an ml.inf2 type",
    ),
    "ServingConfig.initial_instance_count": Range(
        INITIAL_COUNT.low,
        100,
        "within autoscaling's min..max, which stops at 100",
        INITIAL_COUNT,
        {"autoscaling": {"max_capacity": 100}},
    ),
    "ServingConfig.volume_size_gb": Range(4, VARIANT_VOLUME.high, "the smallest model's weights", VARIANT_VOLUME),
    "ServingConfig.container_startup_health_check_timeout_seconds": Range(
        STARTUP.low,
        STARTUP.high,
        "SageMaker's",
        STARTUP,
        {"lmi": {"model_loading_timeout": 60}, "rollout": {"maximum_execution_timeout_seconds": 28800}},
    ),
    "ServingConfig.model_data_download_timeout_seconds": Range(DOWNLOAD.low, DOWNLOAD.high, "SageMaker's", DOWNLOAD),
    # RolloutConfig
    "RolloutConfig.strategy": Choice(("rolling", "blue_green"), "canary", "DeploymentConfig's two policies"),
    "RolloutConfig.maximum_batch_percent": Range(BATCH.low, 100, PERCENT, BATCH),
    "RolloutConfig.rollback_maximum_batch_percent": Range(
        5, 100, "no slower than the smallest forward batch AWS documents", ROLLBACK
    ),
    "RolloutConfig.wait_interval_seconds": Range(WAIT.low, WAIT.high, "SageMaker's", WAIT),
    "RolloutConfig.maximum_execution_timeout_seconds": Range(EXECUTION.low, EXECUTION.high, "SageMaker's", EXECUTION),
    "RolloutConfig.traffic": Choice(
        ("all_at_once", "canary"), "linear", "TrafficRoutingConfigType's ALL_AT_ONCE, CANARY"
    ),
    "RolloutConfig.canary_percent": Range(CANARY.low, CANARY.high, "SageMaker's (documented 50%)", CANARY),
    "RolloutConfig.termination_wait_seconds": Range(TERMINATION.low, TERMINATION.high, "SageMaker's", TERMINATION),
    # AutoscalingConfig: Application Auto Scaling's model bounds none of them
    "AutoscalingConfig.min_capacity": Range(
        1, 100, "target tracking never scales out of zero; 100: a typo guard", MIN_CAPACITY, {"max_capacity": 100}
    ),
    "AutoscalingConfig.max_capacity": Range(1, 100, "a typo guard", MAX_CAPACITY),
    "AutoscalingConfig.target_invocations_per_instance": Range(1, 100000, "invocations per instance-minute", TARGET),
    "AutoscalingConfig.scale_in_cooldown_seconds": Range(0, 86400, "at most a day", SCALE_IN),
    "AutoscalingConfig.scale_out_cooldown_seconds": Range(0, 86400, "at most a day", SCALE_OUT),
    # AlarmConfig
    "AlarmConfig.email": Text(
        ("ops@example.com",), (("ops@example", MUST_MATCH), ("a b@example.com", MUST_MATCH)), "an e-mail address"
    ),
    "AlarmConfig.model_latency_p90_ms": Range(10, 600000, "10 ms to 10 minutes", THRESHOLD),
    "AlarmConfig.invocation_5xx_errors": Range(1, 100000, "at least one error", THRESHOLD),
    "AlarmConfig.invocation_4xx_rate_percent": Range(0.1, 100, PERCENT, THRESHOLD),
    "AlarmConfig.cpu_percent": Range(1, 100, PERCENT, THRESHOLD),
    "AlarmConfig.memory_percent": Range(1, 100, PERCENT, THRESHOLD),
    "AlarmConfig.period_seconds": Choice((60, 300), 120, "per-minute metrics: multiples of 60 (documented)", PERIOD),
    "AlarmConfig.evaluation_periods": Range(
        EVALUATIONS.low, 60, "inside the one-day window at 300 s", EVALUATIONS, {"datapoints_to_alarm": 1}
    ),
    "AlarmConfig.datapoints_to_alarm": Range(
        DATAPOINTS.low, 60, "at most evaluation_periods", DATAPOINTS, {"evaluation_periods": 60}
    ),
    "ScaleToZeroConfig.idle_minutes": Range(1, 1440, "one-minute periods in one day", IDLE_PERIODS),
    "DataCaptureConfig.sampling_percent": Range(1, SAMPLING.high, "0 captures nothing", SAMPLING),
    "DataCaptureConfig.prefix": Text(
        ("data-capture/", "a/b/"), (("data-capture", MUST_MATCH), ("/x/", MUST_MATCH)), "an S3 prefix ending in /"
    ),
    # LMI NeuronX options (serving.properties)
    "LmiOptions.tensor_parallel_degree": Range(1, 24, "ml.inf2.48xlarge's 24 NeuronCores"),
    "LmiOptions.n_positions": Range(128, 32768, "LMI's 128-token default up to 32k"),
    "LmiOptions.rolling_batch": Choice(("auto", "tnx", "vllm", "disable"), "lmi-dist", "LMI's rolling_batch values"),
    "LmiOptions.max_rolling_batch_size": Range(1, 256, "project"),
    "LmiOptions.batch_size": Range(1, 256, "project"),
    "LmiOptions.dtype": Choice(("fp32", "fp16", "bf16"), "int8", "LMI's dtypes"),
    "LmiOptions.model_loading_timeout": Range(
        STARTUP.low, STARTUP.high, "must fit the container start-up timeout SageMaker allows"
    ),
    "LmiOptions.neuron_optimize_level": Range(1, 3, "LMI's levels 1..3"),
    "LmiOptions.quantize": Choice(("static_int8",), "dynamic_int8", "LMI's quantize"),
    "LmiOptions.group_query_attention": Choice(
        ("shard-over-heads", "shard-over-batch", "replicated-heads"), "shard", "transformers-neuronx's GQA modes"
    ),
    "LmiOptions.output_formatter": Choice(("json", "jsonlines", "sse"), "text", "LMI's formatters"),
    # vLLM Neuron compiled shape
    "NeuronOptions.batch_size": Range(1, 64, "project"),
    "NeuronOptions.sequence_length": Range(128, 131072, "project"),
    "NeuronOptions.tensor_parallel_size": Range(1, 24, "ml.inf2.48xlarge's 24 NeuronCores"),
    # PruningConfig
    "PruningConfig.job_name_prefix": Text(
        ("a" * TUNING_PREFIX,),
        (
            (
                "a" * (TUNING_PREFIX + 1),
                f"at most {TUNING_PREFIX} characters (tuning job names are limited to {TUNING_NAME_MAX}) "
                + TUNING_NAME.note(),
            ),
            ("A", MUST_MATCH),
        ),
        "tuning job names fit HyperParameterTuningJobName",
    ),
    "PruningConfig.search_space": Choice(("uniform", "per_layer"), "layerwise", "search_space.py's spaces"),
    "PruningConfig.num_layers": Range(1, 48, "encoder sizes", context=ENCODER),
    "PruningConfig.num_heads": Range(1, 64, "encoder sizes", context=ENCODER),
    "PruningConfig.intermediate_size": Range(1, 65536, "encoder sizes", context=ENCODER),
    "PruningConfig.supernet_instance_type": Text(("ml.g5.xlarge",), (("ml.g5.3xlarge", "not a SageMaker"),), "enum"),
    "PruningConfig.supernet_max_runtime_hours": Range(RUNTIME_HOURS.low, 72, "3 days for one model", RUNTIME_HOURS),
    "PruningConfig.trial_instance_type": Text(("ml.c5.xlarge",), (("ml.c5.xxlarge", "not a SageMaker"),), "enum"),
    "PruningConfig.trial_max_runtime_minutes": Range(5, 1440, "5 minutes to a day per trial", TRIAL_MINUTES),
    "PruningConfig.max_jobs": Range(
        MAX_JOBS.low, MAX_JOBS.high, "the tuning limits", MAX_JOBS, {"max_parallel_jobs": 1}
    ),
    "PruningConfig.max_parallel_jobs": Range(
        PARALLEL_JOBS.low, PARALLEL_JOBS.high, "the tuning limits", PARALLEL_JOBS, {"max_jobs": 750}
    ),
    "PruningConfig.objectives": Choice(
        (
            "validation_error,num_parameters",
            "validation_error,latency_ms",
            "validation_error,macs",
            "validation_error,num_parameters,macs",
        ),
        "num_parameters",
        "the Pareto objectives the selection job knows",
    ),
    "PruningConfig.max_error_increase": Range(0, 1, "an error rate's budget"),
    "PruningConfig.minimise": Choice(("num_parameters",), "params", "an objective (latency_ms, macs need theirs)"),
    "PruningConfig.quantize": Choice(("none", "dynamic_int8"), "static_int8", "the export's modes"),
    "PruningConfig.helper_instance_type": Text(("ml.m5.large",), (("m5.large", MUST_MATCH),), "ml.<family>.<size>"),
    "PruningConfig.volume_size_gb": Range(5, 1024, "an encoder, its data and checkpoints", JOB_VOLUME),
    "PruningConfig.image_uri": Text(
        (_image(255),), ((_image(256), "got 256 characters; at most 255"),), "TrainingImage", TRAINING_IMAGE
    ),
    "PruningConfig.log_retention_days": LOG_RETENTION,
    # EncoderEndpointConfig (pruning.base_endpoint / pruned_endpoint)
    "EncoderEndpointConfig.model_key": Text(
        (MODEL_KEY,), (("pruning/run/base/model.tar", MUST_MATCH), ("model.tar.gz", MUST_MATCH)), "a model.tar.gz key"
    ),
    "EncoderEndpointConfig.instance_type": Text(
        ("ml.c5.xlarge",), (("ml.c5.3xlarge", "not a SageMaker ProductionVariantInstanceType"),), "enum"
    ),
    "EncoderEndpointConfig.initial_instance_count": Range(
        INITIAL_COUNT.low, 100, "within autoscaling's range", INITIAL_COUNT, {"autoscaling": {"max_capacity": 100}}
    ),
    "EncoderEndpointConfig.volume_size_gb": Range(
        VARIANT_VOLUME.low, VARIANT_VOLUME.high, "SageMaker's", VARIANT_VOLUME
    ),
    "EncoderEndpointConfig.model_server_workers": Range(1, 64, "project (SAGEMAKER_MODEL_SERVER_WORKERS)"),
    "EncoderEndpointConfig.container_startup_health_check_timeout_seconds": Range(
        STARTUP.low, STARTUP.high, "SageMaker's", STARTUP, {"rollout": {"maximum_execution_timeout_seconds": 28800}}
    ),
    "EncoderEndpointConfig.model_data_download_timeout_seconds": Range(
        DOWNLOAD.low, DOWNLOAD.high, "SageMaker's", DOWNLOAD
    ),
    # NetworkConfig (isolated mode)
    "NetworkConfig.vpc_id": Text(
        ("vpc-01234567", "vpc-0123456789abcdef0"),
        (("vpc-0123456", MUST_MATCH), ("vpc-xyz", MUST_MATCH)),
        "EC2 ids",
        context={"isolated": True, "subnet_ids": SUBNETS[:2]},
    ),
    "NetworkConfig.subnet_ids": Text(
        (SUBNETS[:16],),
        ((SUBNETS, "got 17 items; at most 16"), (["subnet-1"], MUST_MATCH)),
        "botocore's VpcConfig.Subnets maximum; EC2 subnet ids",
        MODEL_SUBNETS,
        ISOLATED_VPC,
    ),
    "NetworkConfig.security_group_ids": Text(
        (GROUPS[:5],),
        ((GROUPS, "got 6 items; at most 5"), (["sg-1"], MUST_MATCH)),
        "botocore's VpcConfig.SecurityGroupIds maximum",
        MODEL_GROUPS,
        {**ISOLATED_VPC, "subnet_ids": SUBNETS[:2]},
    ),
    "NetworkConfig.s3_prefix_list_id": Text(
        ("pl-63a5400a",), (("pl-63a54", MUST_MATCH),), "EC2 prefix list ids", context={"isolated": True}
    ),
    # the model lock (config/<env>.model.json): written by tools/promote_model from the package's records
    "ModelLock.model_prefix": Text(
        ("models/j/output/model/",), (("models/j", MUST_MATCH), ("/models/j/", MUST_MATCH)), "an S3 key prefix"
    ),
    "ModelLock.compiled_prefix": Text(
        ("models/j/neuron/bs4/",), (("models/j/neuron", MUST_MATCH),), "an S3 key prefix"
    ),
    "ModelFacts.base_model": Text(
        ("TinyLlama/TinyLlama-1.1B-Chat-v1.0", "s" * 256),
        (("a b", MUST_MATCH), ("s" * 257, MUST_MATCH)),
        "a hub id or a path: 256 characters, CustomerMetadataProperties' value maximum",
    ),
    "ModelFacts.model_type": Text(
        ("llama", "qwen2", "a" * 32), (("Llama", MUST_MATCH), ("a" * 33, MUST_MATCH)), "config.json model_type names"
    ),
    "ModelFacts.architecture": Text(
        ("LlamaForCausalLM", "A" * 64), (("Llama-For", MUST_MATCH), ("A" * 65, MUST_MATCH)), "transformers classes"
    ),
    "ModelFacts.dtype": Text(
        ("float16", "bfloat16"), (("Float16", MUST_MATCH), ("f" * 17, MUST_MATCH)), "torch dtype names"
    ),
    **{
        f"ModelFacts.{name}": Text((1, 6738415616), ((0, "expected an integer >= 1"),), "a count: at least one")
        for name in ("parameters", "size_bytes", "context_length", "num_attention_heads", "num_key_value_heads")
    },
    "BaseModelRecord.hub_id": Text(
        ("meta-llama/Llama-3.1-8B-Instruct", "tiny-pretrained"),
        (("meta llama/x", MUST_MATCH), ("a/b/c", MUST_MATCH)),
        "a hub id, owner/name or a bare name",
    ),
    "BaseModelRecord.source": Text(
        ("Qwen/Qwen3-8B", "s3://b/base-models/x/", "s" * 1024),
        (("a b", MUST_MATCH), ("s" * 1025, MUST_MATCH)),
        "a hub id, an S3 URI or a folder",
    ),
    "BaseModelRecord.revision": Text(
        ("0e9e39f249a16976918f6564b8830bc894c89659", "main", "r" * 128),
        (("a b", MUST_MATCH), ("r" * 129, MUST_MATCH)),
        "a hub commit or branch",
    ),
    "BaseModelRecord.model_type": Text(
        ("llama", "qwen3", "a" * 32), (("Llama", MUST_MATCH), ("a" * 33, MUST_MATCH)), "config.json model_type names"
    ),
    "BaseModelRecord.architecture": Text(
        ("LlamaForCausalLM", "A" * 64), (("Llama-For", MUST_MATCH), ("A" * 65, MUST_MATCH)), "transformers classes"
    ),
    "BaseModelRecord.dtype": Text(
        ("float16", "bfloat16"), (("Float16", MUST_MATCH), ("f" * 17, MUST_MATCH)), "torch dtype names"
    ),
    **{
        f"BaseModelRecord.{name}": Text((1, 70553706496), ((0, "expected an integer >= 1"),), "a count: at least one")
        for name in (
            "parameters",
            "context_length",
            "hidden_size",
            "num_hidden_layers",
            "num_attention_heads",
            "num_key_value_heads",
            "head_dim",
            "intermediate_size",
            "vocab_size",
        )
    },
    "ServingPin.backend": Text(
        ("lmi_neuronx", "vllm_neuronx"), (("LMI", MUST_MATCH), ("b" * 33, MUST_MATCH)), "backend folder names"
    ),
    "ServingPin.image": Text(
        (f"{ECR}/djl-inference:0.30.0-neuronx-sdk2.20.1",),
        (("an image", MUST_MATCH), ("i" * 256, MUST_MATCH)),
        "ContainerImage: 255 characters, no whitespace",
    ),
    "ServingPin.instance_types": Text(
        (["ml.inf2.xlarge", "ml.inf2.24xlarge"],), ((["inf2.xlarge"], MUST_MATCH),), "SageMaker instance types"
    ),
    "Lineage.training_job": Text(
        ("llm-inf2-dev-0-0", "j" * 63), (("j" * 64, MUST_MATCH), ("a job", MUST_MATCH)), "TrainingJobName: 63"
    ),
    "Lineage.dataset": Text(("s3://b/datasets/x/",), (("a b", MUST_MATCH),), "an S3 URI"),
    "Lineage.code_asset_hash": Text(
        ("9c9b7c89", "f" * 128), (("9c9b7c8", MUST_MATCH), ("F" * 8, MUST_MATCH)), "a hex digest"
    ),
    "Lineage.dataset_marker_version_id": Text(
        ("52e1bc15-cdf6-4297-be9c-a5b34903319d", "absent"), (("a b", MUST_MATCH),), "an S3 version id"
    ),
    "Lineage.source_model_package_arn": Text(
        ("arn:aws:sagemaker:us-east-1:123456789012:model-package/g/1",), (("a b", MUST_MATCH),), "an ARN"
    ),
    **{
        f"CompiledFacts.{name}": Text((1, 8), ((0, "expected an integer >= 1"),), "a shape: at least one")
        for name in ("tensor_parallel_degree", "n_positions", "batch_size")
    },
    "CompiledFacts.dtype": Text(("f16", "bf16"), (("F16", MUST_MATCH), ("f" * 9, MUST_MATCH)), "amp names"),
    "CompiledFacts.compiler_version": Text(
        ("2.15.141.0", "2.15.141.0+d3cfc8ca"), (("2", MUST_MATCH), ("v2.15.141.0", MUST_MATCH)), "neuronx-cc"
    ),
    "DeployConfig.after": Text(
        ("staging",), (("Staging", MUST_MATCH), ("e" * 17, MUST_MATCH)), "environment names (config/<env>.yaml)"
    ),
    "RehearsalConfig.environment": Text(
        ("prod",), (("Prod", MUST_MATCH), ("e" * 17, MUST_MATCH)), "environment names (config/<env>.yaml)"
    ),
}

# the size the loader reads from dev's base record (config/models/), never typed in the YAML
_SERVING = {**_DEV["serving"], "model_parameters_billions": 1.1}
# TinyLlama's facts, as in tests/synth.py's FACTS; not imported from there, which starts jsii (aws_cdk) and would
# slow every mutant's fast stage
_FACTS = {
    "base_model": "TinyLlama/TinyLlama-1.1B-Chat-v1.0",
    "model_type": "llama",
    "architecture": "LlamaForCausalLM",
    "parameters": 1100048384,
    "size_bytes": 2200119864,
    "dtype": "bfloat16",
    "context_length": 2048,
    "num_attention_heads": 32,
    "num_key_value_heads": 4,
    "chat_template": True,
}
_PIN = {
    "backend": "lmi_neuronx",
    "image": f"{ECR}/djl-inference:0.30.0-neuronx-sdk2.20.1",
    "instance_types": ["ml.inf2.xlarge"],
}
_LINEAGE = {"training_job": "llm-inf2-dev-0-0", "dataset": "s3://b/datasets/x/", "code_asset_hash": "9c9b7c89"}
BASES: dict[str, dict[str, Any]] = {
    "ServingConfig": _SERVING,
    "EncoderEndpointConfig": {"model_key": MODEL_KEY},
    "ModelFacts": _FACTS,
    "BaseModelRecord": yaml.safe_load((ROOT / "config" / "models" / "tinyllama-1.1b-chat-v1.0.yaml").read_text()),
    "ServingPin": _PIN,
    "Lineage": _LINEAGE,
    "RehearsalConfig": {"environment": "prod"},
    "CompiledFacts": {
        "tensor_parallel_degree": 2,
        "n_positions": 2048,
        "batch_size": 4,
        "dtype": "f16",
        "compiler_version": "2.15.141.0",
    },
    "ModelLock": {
        "model_package_arn": "arn:aws:sagemaker:us-east-1:123456789012:model-package/g/1",
        "approval_status": "Approved",
        "model_prefix": "models/j/output/model/",
        "facts": _FACTS,
        "serving": _PIN,
        "lineage": _LINEAGE,
    },
}
SETTINGS = bounded_settings()


def _merged(base: dict, changes: dict) -> dict:
    out = dict(base)
    for key, value in changes.items():
        out[key] = _merged(out.get(key) or {}, value) if isinstance(value, dict) and key not in ("tags",) else value
    return out


def _parse(name: str, value: Any) -> Any:
    """The section of `name` parsed with the setting at `value` (and the entry's context), as `load_config` would."""
    cls, attr, path, _ = SETTINGS[name]
    section_path = path.rsplit(".", 1)[0] if "." in path else ""
    edge = EDGES[name]
    data = _merged(BASES.get(cls.__name__, {}), getattr(edge, "context", {}))
    data[attr] = value
    return getattr(parse(cls, data, source=SOURCE, path=section_path), attr)


def _refused(name: str, value: Any) -> str:
    with pytest.raises(ConfigError) as caught:
        _parse(name, value)
    line = str(caught.value)
    assert "\n" not in line and re.match(
        rf"{re.escape(SOURCE)}: {re.escape(SETTINGS[name][2])}(\[\d+\]|\.\w+)?: ", line
    ), line
    return line


def _past(value: float, kind: Any, direction: int) -> float:
    return value + direction if kind is int else math.nextafter(value, direction * math.inf)


def test_every_bounded_setting_has_its_edges():
    assert sorted(SETTINGS) == sorted(EDGES)


RANGES = sorted(name for name, edge in EDGES.items() if isinstance(edge, Range))


@pytest.mark.parametrize("name", RANGES)
def test_a_number_is_accepted_at_both_edges_and_refused_one_past(name):
    edge, kind = EDGES[name], SETTINGS[name][3]
    expected = f"expected {'an integer' if kind is int else 'a number'} in {edge.low}..{edge.high}"
    for value, direction in ((edge.low, -1), (edge.high, 1)):
        assert _parse(name, value) == value
        past = _past(value, kind, direction)
        line = _refused(name, past)
        assert f": got {describe(past)}; {expected}" in line, line
        if edge.api is not None:
            assert line.endswith(")") and edge.api.note() in line, line


@pytest.mark.parametrize("name", sorted(n for n, e in EDGES.items() if isinstance(e, Choice)))
def test_a_choice_accepts_its_values_and_refuses_another(name):
    edge = EDGES[name]
    for value in edge.values:
        assert _parse(name, value) == value
    line = _refused(name, edge.refused)
    assert f"got {describe(edge.refused)}; allowed: " in line, line
    for value in edge.values:
        assert repr(value) in line
    if edge.api is not None:
        assert edge.api.note() in line, line


@pytest.mark.parametrize("name", sorted(n for n, e in EDGES.items() if isinstance(e, Text)))
def test_a_text_setting_accepts_its_examples_and_refuses_the_others(name):
    edge = EDGES[name]
    for value in edge.accepted:
        parsed = _parse(name, value)
        assert parsed == (tuple(value) if isinstance(value, list) else value)
    for value, fragment in edge.refused:
        line = _refused(name, value)
        assert (f": {fragment}" if fragment.startswith("got ") else fragment) in line, line
        if edge.api is not None and (fragment == MUST_MATCH or fragment.startswith("got ")):
            assert edge.api.note() in line, line


# -- the documented rules the expectations rely on, read from botocore's documentation -------------------------
@pytest.mark.parametrize("api", [RUNTIME_HOURS, TRIAL_MINUTES, NONCURRENT, EXPIRATION], ids=lambda a: a.label)
def test_documented_limits_are_the_ones_botocore_documents(api):
    assert api.quote in " ".join(api.documentation().split())


def test_the_idle_alarms_one_day_window_is_documented():
    period = Api("cloudwatch", "PutMetricAlarm", "Period", "").documentation()
    assert ONE_DAY_WINDOW in " ".join(period.split()) and IDLE_PERIODS.high == 1440


def test_rolling_batch_and_canary_limits_are_documented():
    batch = _sm("CreateEndpoint", f"{ROLLING}.MaximumBatchSize", "").documentation()
    canary = _sm("CreateEndpoint", f"{BLUE_GREEN}.TrafficRoutingConfiguration.CanarySize", "").documentation()
    assert "Value must be between 5% to 50%" in batch and "less than or equal to 50%" in canary


def test_tag_keys_name_their_field():
    line = _refused("AppConfig.tags", {"a" * 129: "v"})
    assert "tags: key 'aaaa" in line and TAG_KEY.note() in line, line


def test_both_deployment_policies_share_the_wait_and_timeout_limits():
    """The rolling policy's shapes name the limits of the blue/green ones too."""
    for rolling, blue_green in (
        (f"{ROLLING}.WaitIntervalInSeconds", f"{BLUE_GREEN}.TrafficRoutingConfiguration.WaitIntervalInSeconds"),
        (f"{ROLLING}.MaximumExecutionTimeoutInSeconds", f"{BLUE_GREEN}.MaximumExecutionTimeoutInSeconds"),
    ):
        assert _sm("CreateEndpoint", rolling, "").api_range() == _sm("CreateEndpoint", blue_green, "").api_range()


def test_alarm_periods_are_documented_cloudwatch_periods_within_the_evaluation_window():
    """PutMetricAlarm: 10, 20, 30 or a multiple of 60; Period x EvaluationPeriods at most a day under an hour."""
    documentation = " ".join(PERIOD.documentation().split())
    assert "Valid values are 10, 20, 30, and any multiple of 60." in documentation
    assert "can't be longer than one day (86,400 seconds)" in documentation
    for period in EDGES["AlarmConfig.period_seconds"].values:
        assert period % 60 == 0 and period < 3600  # per-minute SageMaker metrics: no high-resolution periods
        assert period * EDGES["AlarmConfig.evaluation_periods"].high <= 86400


def test_log_retention_is_cloudwatch_logs_documented_list():
    """The Days shape has no enum; its documentation lists the periods, and CDK's RetentionDays agrees."""
    from stacks.config.training import LOG_RETENTION_DAYS

    documentation = Api("logs", "PutRetentionPolicy", "retentionInDays", "").documentation()
    listed = re.search(r"Possible values are: ([0-9, and]+)\.", documentation).group(1)
    documented = tuple(int(n) for n in re.findall(r"\d+", listed))
    assert documented == LOG_RETENTION_DAYS
    for name in ("TrainingConfig.log_retention_days", "PruningConfig.log_retention_days"):
        assert isinstance(EDGES[name], Listed)
        for days in (documented[0], documented[-1], 30):
            assert _parse(name, days) == days
        for days in (documented[0] - 1, documented[-1] + 1, 2, 366):
            line = _refused(name, days)
            assert (
                f"got {days}; allowed: 1, 3, 5, 7" in line
                and "(CloudWatch Logs PutRetentionPolicy retentionInDays; " in line
            )


@pytest.mark.parametrize("api", [RUNTIME_HOURS, TRIAL_MINUTES, WAIT_HOURS], ids=lambda a: a.label)
def test_a_setting_in_hours_or_minutes_takes_the_whole_units_inside_the_apis_seconds(api):
    from stacks.config import aws_limits

    [field] = [
        f
        for f in vars(aws_limits).values()
        if isinstance(f, aws_limits.AwsField) and f.label == api.label and f.per_unit == api.per_unit
    ]
    high = api.high if api.api_range()[1] is not None else None
    assert aws_limits.setting_range(field) == (api.low, high)
