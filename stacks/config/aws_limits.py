"""The AWS request fields config settings are sent as, with their limits from botocore's service models.

A setting declared `setting(..., aws=FIELD)` takes FIELD's min and max (botocore's `min`/`max`, converted to the
setting's unit) unless its own `ge`/`le` are stricter, and each of its one-line errors names the field, e.g.
`(SageMaker CreateEndpointConfig ProductionVariant.InitialInstanceCount: 1..)`. Rules AWS documents but the model
does not encode (botocore's ParamValidator checks minimums only, the services the rest) are `documented_*` values
here, each with where AWS says it. A model is parsed when a limit of its service is first needed (aws_models).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cache
from typing import Any

from .aws_models import service_model

SERVICE_LABELS = {
    "sagemaker": "SageMaker",
    "cloudwatch": "CloudWatch",
    "logs": "CloudWatch Logs",
    "application-autoscaling": "Application Auto Scaling",
    "s3": "S3",
    "secretsmanager": "Secrets Manager",
}


@dataclass(frozen=True)
class AwsField:
    """A member of an AWS request: `path` is `<Member>` of the operation's input, or `<Shape>.<Member>[.<Member>]`
    from a structure inside it (`ProductionVariant.InitialInstanceCount`); list levels are stepped through."""

    service: str
    operation: str
    path: str
    per_unit: int = 1  # API units per setting unit: 3600 for a setting in hours sent as seconds
    documented_min: int | None = None
    documented_max: int | None = None
    rule: str = ""  # a documented rule that is not a range (CloudWatch periods)
    citation: str = ""

    @property
    def label(self) -> str:
        return f"{SERVICE_LABELS[self.service]} {self.operation} {self.path}"

    def note(self) -> str:
        """` (<label>: <min>..<max>[; rule])`, the suffix of every error line of a setting sent as this field."""
        low, high = api_range(self)
        unit = {"string": " characters", "list": " items"}.get(shape_of(self)["type"], "")
        span = "" if low is None and high is None else f": {_text(low)}..{_text(high)}{unit}"
        rule = f"; {self.rule}" if self.rule else ""
        return f" ({self.label}{span}{rule})"

    @property
    def kind(self) -> str:
        """botocore's type of the field: integer, long, double, string, list, ..."""
        return shape_of(self)["type"]


def _text(value: float | None) -> str:
    if value is None:
        return ""
    return str(int(value)) if float(value).is_integer() else str(value)


@cache
def shape_of(field: AwsField) -> dict[str, Any]:
    """The botocore shape `field.path` ends at (a list's own shape when the path ends at a list member)."""
    model = service_model(field.service)
    shapes = model["shapes"]
    first, *rest = field.path.split(".")
    request = shapes[model["operations"][field.operation]["input"]["shape"]]
    if first in request["members"]:
        shape = shapes[request["members"][first]["shape"]]
    else:
        shape = shapes[first]
        if not rest:
            raise KeyError(f"{field.path}: name a member of {first}")
    for member in rest:
        while shape["type"] == "list":
            shape = shapes[shape["member"]["shape"]]
        shape = shapes[shape["members"][member]["shape"]]
    return shape


@cache
def api_range(field: AwsField) -> tuple[float | None, float | None]:
    """(min, max) in the API's unit: botocore's, narrowed by what AWS documents."""
    shape = shape_of(field)
    low, high = shape.get("min"), shape.get("max")
    if field.documented_min is not None:
        low = field.documented_min if low is None else max(low, field.documented_min)
    if field.documented_max is not None:
        high = field.documented_max if high is None else min(high, field.documented_max)
    return low, high


def map_value_length(field: AwsField) -> int:
    """The longest value botocore allows in the map `field` ends at (a CreateTrainingJob Environment value)."""
    shape = shape_of(field)
    return service_model(field.service)["shapes"][shape["value"]["shape"]]["max"]


def setting_range(field: AwsField) -> tuple[int | None, int | None]:
    """(min, max) in the setting's unit: whole setting units inside the API's range."""
    low, high = api_range(field)
    return (
        None if low is None else math.ceil(low / field.per_unit),
        None if high is None else math.floor(high / field.per_unit),
    )


API_REFERENCE = "https://docs.aws.amazon.com/sagemaker/latest/APIReference/"

# -- SageMaker: the endpoint (CreateEndpointConfig's variant and capture, CreateEndpoint's DeploymentConfig) ----------
VARIANT_INSTANCE_COUNT = AwsField("sagemaker", "CreateEndpointConfig", "ProductionVariant.InitialInstanceCount")
VARIANT_VOLUME_SIZE = AwsField("sagemaker", "CreateEndpointConfig", "ProductionVariant.VolumeSizeInGB")
VARIANT_STARTUP_TIMEOUT = AwsField(
    "sagemaker", "CreateEndpointConfig", "ProductionVariant.ContainerStartupHealthCheckTimeoutInSeconds"
)
VARIANT_DOWNLOAD_TIMEOUT = AwsField(
    "sagemaker", "CreateEndpointConfig", "ProductionVariant.ModelDataDownloadTimeoutInSeconds"
)
CAPTURE_SAMPLING = AwsField("sagemaker", "CreateEndpointConfig", "DataCaptureConfig.InitialSamplingPercentage")
MODEL_IMAGE = AwsField("sagemaker", "CreateModel", "ContainerDefinition.Image")
MODEL_SUBNETS = AwsField("sagemaker", "CreateModel", "VpcConfig.Subnets")
MODEL_SECURITY_GROUPS = AwsField("sagemaker", "CreateModel", "VpcConfig.SecurityGroupIds")
ROLLING_BATCH = AwsField(
    "sagemaker",
    "CreateEndpoint",
    "RollingUpdatePolicy.MaximumBatchSize.Value",
    documented_min=5,
    citation=API_REFERENCE + "API_RollingUpdatePolicy.html: 'Value must be between 5% to 50% of the variant's "
    "total instance count' (the 50% is not enforced here: RolloutConfig.maximum_batch_percent says why)",
)
ROLLBACK_BATCH = AwsField("sagemaker", "CreateEndpoint", "RollingUpdatePolicy.RollbackMaximumBatchSize.Value")
# One shape (WaitIntervalInSeconds, MaximumExecutionTimeoutInSeconds) in both policies: the rolling one names it.
WAIT_INTERVAL = AwsField("sagemaker", "CreateEndpoint", "RollingUpdatePolicy.WaitIntervalInSeconds")
EXECUTION_TIMEOUT = AwsField("sagemaker", "CreateEndpoint", "RollingUpdatePolicy.MaximumExecutionTimeoutInSeconds")
CANARY_SIZE = AwsField(
    "sagemaker",
    "CreateEndpoint",
    "TrafficRoutingConfig.CanarySize.Value",
    documented_max=50,
    citation=API_REFERENCE + "API_TrafficRoutingConfig.html: 'Value must be less than or equal to 50% of the "
    "variant's total instance count'",
)
TERMINATION_WAIT = AwsField("sagemaker", "CreateEndpoint", "BlueGreenUpdatePolicy.TerminationWaitInSeconds")

# -- SageMaker: training and tuning jobs ---------------------------------------------------------------------------
TRAINING_JOB_NAME = AwsField("sagemaker", "CreateTrainingJob", "TrainingJobName")
TUNING_JOB_NAME = AwsField("sagemaker", "CreateHyperParameterTuningJob", "HyperParameterTuningJobName")
TRAINING_IMAGE = AwsField("sagemaker", "CreateTrainingJob", "AlgorithmSpecification.TrainingImage")
TRAINING_INSTANCE_COUNT = AwsField("sagemaker", "CreateTrainingJob", "ResourceConfig.InstanceCount")
TRAINING_VOLUME_SIZE = AwsField("sagemaker", "CreateTrainingJob", "ResourceConfig.VolumeSizeInGB")
TRAINING_SUBNETS = AwsField("sagemaker", "CreateTrainingJob", "VpcConfig.Subnets")
TRAINING_SECURITY_GROUPS = AwsField("sagemaker", "CreateTrainingJob", "VpcConfig.SecurityGroupIds")
_MAX_RUNTIME_DAYS = 28  # StoppingCondition.MaxRuntimeInSeconds's documentation: "The maximum value is 28 days."
_RUNTIME_CITATION = API_REFERENCE + "API_StoppingCondition.html: 'The maximum value is 28 days.'"
MAX_RUNTIME_HOURS = AwsField(
    "sagemaker",
    "CreateTrainingJob",
    "StoppingCondition.MaxRuntimeInSeconds",
    per_unit=3600,
    documented_max=_MAX_RUNTIME_DAYS * 86400,
    citation=_RUNTIME_CITATION,
)
TRIAL_MAX_RUNTIME_MINUTES = AwsField(
    "sagemaker",
    "CreateHyperParameterTuningJob",
    "StoppingCondition.MaxRuntimeInSeconds",
    per_unit=60,
    documented_max=_MAX_RUNTIME_DAYS * 86400,
    citation=_RUNTIME_CITATION,
)
MAX_WAIT_HOURS = AwsField("sagemaker", "CreateTrainingJob", "StoppingCondition.MaxWaitTimeInSeconds", per_unit=3600)
_TUNING_LIMITS = "https://docs.aws.amazon.com/sagemaker/latest/dg/automatic-model-tuning-limits.html"
TUNING_MAX_JOBS = AwsField(
    "sagemaker",
    "CreateHyperParameterTuningJob",
    "ResourceLimits.MaxNumberOfTrainingJobs",
    documented_max=750,
    citation=_TUNING_LIMITS + ": training jobs per tuning job, 750 (Random search: raisable by a quota request)",
)
TUNING_MAX_PARALLEL_JOBS = AwsField(
    "sagemaker",
    "CreateHyperParameterTuningJob",
    "ResourceLimits.MaxParallelTrainingJobs",
    documented_max=100,
    citation=_TUNING_LIMITS + ": parallel training jobs per tuning job, 10 by default, raisable to 100",
)
TRAINING_ENVIRONMENT = AwsField("sagemaker", "CreateTrainingJob", "Environment")
TAG_KEY = AwsField("sagemaker", "CreateTrainingJob", "Tag.Key")
TAG_VALUE = AwsField("sagemaker", "CreateTrainingJob", "Tag.Value")

# -- Secrets Manager: the hub token a training job reads (its ARN, the secret's name inside it, the secret's key) ---
HUB_TOKEN_SECRET = AwsField("secretsmanager", "GetSecretValue", "SecretId")
SECRET_NAME = AwsField("secretsmanager", "CreateSecret", "Name")
SECRET_KMS_KEY = AwsField("secretsmanager", "CreateSecret", "KmsKeyId")

# -- CloudWatch alarms ----------------------------------------------------------------------------------------------
_PUT_METRIC_ALARM = "https://docs.aws.amazon.com/AmazonCloudWatch/latest/APIReference/API_PutMetricAlarm.html"
ALARM_PERIOD = AwsField(
    "cloudwatch",
    "PutMetricAlarm",
    "Period",
    rule="10, 20, 30 or a multiple of 60",
    citation=_PUT_METRIC_ALARM + ": 'Valid values are 10, 20, 30, and any multiple of 60' (10-30 only for "
    "high-resolution metrics; SageMaker's endpoint metrics are per minute)",
)
ALARM_EVALUATION_PERIODS = AwsField("cloudwatch", "PutMetricAlarm", "EvaluationPeriods")
ALARM_DATAPOINTS = AwsField("cloudwatch", "PutMetricAlarm", "DatapointsToAlarm")
ALARM_THRESHOLD = AwsField("cloudwatch", "PutMetricAlarm", "Threshold")

# The idle alarm of a scale-to-zero inference component: one-minute periods, as many as the idle minutes.
_ONE_DAY_OF_MINUTES = 86400 // 60
IDLE_MINUTES = AwsField(
    "cloudwatch",
    "PutMetricAlarm",
    "EvaluationPeriods",
    documented_max=_ONE_DAY_OF_MINUTES,
    citation=_PUT_METRIC_ALARM + " (Period, also in botocore's model): 'For alarms with a period of less than one "
    "hour (3,600 seconds), the total evaluation period can't be longer than one day (86,400 seconds)': 1440 "
    "one-minute periods",
)

# -- Application Auto Scaling: the variant's scalable target and its target-tracking policy -------------------------
SCALING_MIN_CAPACITY = AwsField("application-autoscaling", "RegisterScalableTarget", "MinCapacity")
SCALING_MAX_CAPACITY = AwsField("application-autoscaling", "RegisterScalableTarget", "MaxCapacity")
SCALING_TARGET_VALUE = AwsField(
    "application-autoscaling", "PutScalingPolicy", "TargetTrackingScalingPolicyConfiguration.TargetValue"
)
SCALE_IN_COOLDOWN = AwsField(
    "application-autoscaling", "PutScalingPolicy", "TargetTrackingScalingPolicyConfiguration.ScaleInCooldown"
)
SCALE_OUT_COOLDOWN = AwsField(
    "application-autoscaling", "PutScalingPolicy", "TargetTrackingScalingPolicyConfiguration.ScaleOutCooldown"
)

# -- S3 lifecycle rules (the model gives no bounds; "The value must be a non-zero positive integer.") -------------
_LIFECYCLE = (
    "https://docs.aws.amazon.com/AmazonS3/latest/API/API_{}.html: 'The value must be a non-zero positive integer'"
)
NONCURRENT_DAYS = AwsField(
    "s3",
    "PutBucketLifecycleConfiguration",
    "NoncurrentVersionExpiration.NoncurrentDays",
    documented_min=1,
    citation=_LIFECYCLE.format("NoncurrentVersionExpiration"),
)
EXPIRATION_DAYS = AwsField(
    "s3",
    "PutBucketLifecycleConfiguration",
    "LifecycleExpiration.Days",
    documented_min=1,
    citation=_LIFECYCLE.format("LifecycleExpiration"),
)
ABORT_MULTIPART_DAYS = AwsField(
    "s3", "PutBucketLifecycleConfiguration", "AbortIncompleteMultipartUpload.DaysAfterInitiation"
)

# -- CloudWatch Logs retention: the periods the Days shape's documentation lists (the model has no enum) ------------
LOG_RETENTION = AwsField(
    "logs",
    "PutRetentionPolicy",
    "retentionInDays",
    rule="one of the documented periods",
    citation="https://docs.aws.amazon.com/AmazonCloudWatchLogs/latest/APIReference/API_PutRetentionPolicy.html",
)
