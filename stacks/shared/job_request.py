"""Typed builder for the Parameters of Step Functions' `sagemaker:createTrainingJob.sync` integration.

CDK's SageMakerCreateTrainingJob task cannot set OutputDataConfig.CompressionType, and LMI needs the
merged model as plain files (`option.model_id` points at an S3 prefix), so the state is raw ASL built
here from typed fields. Values that are only known at run time are `Ref`s (JSONPath or intrinsic). Every location,
the image, the code and the secrets are typed with what the job does with them (`access`), which is what its
execution role is made of (stacks/shared/job_role.py).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from .job_access import JobAccess, JobImage, JobSecret, Location, S3Scope
from .placement import Placement

CREATE_TRAINING_JOB_SYNC = "arn:{partition}:states:::sagemaker:createTrainingJob.sync"


class Ref(str):
    """A JSONPath (`$.a.b`, `$$.Execution.Id`) or intrinsic (`States.Format(...)`) resolved per execution."""

    __slots__ = ()

    def __new__(cls, expression: str) -> Ref:
        if not expression.startswith(("$", "States.")):
            raise ValueError(f"not a JSONPath or intrinsic function: {expression!r}")
        return super().__new__(cls, expression)


def _put(target: dict[str, Any], key: str, value: Any) -> None:
    """ASL marks run-time values by a `.$` suffix on the key."""
    if isinstance(value, Ref):
        target[f"{key}.$"] = str(value)
    else:
        target[key] = value


@dataclass(frozen=True)
class S3Channel:
    """An input channel, read by the job; the container sees it as /opt/ml/input/data/<name> (SM_CHANNEL_<NAME>).
    `scope`: the objects its URI may name (the prefix an execution's JSONPath is confined to)."""

    name: str
    s3_uri: str | Ref
    scope: S3Scope

    def to_asl(self) -> dict[str, Any]:
        source: dict[str, Any] = {"S3DataType": "S3Prefix", "S3DataDistributionType": "FullyReplicated"}
        _put(source, "S3Uri", self.s3_uri)
        return {"ChannelName": self.name, "DataSource": {"S3DataSource": source}, "InputMode": "File"}


@dataclass(frozen=True, kw_only=True)
class TrainingJobRequest:
    """Everything CreateTrainingJob needs for one job; `to_asl()` gives the state's Parameters. `role_arn`: the
    execution role (None: the job step makes one from `access`); `output_scope`/`checkpoint_scope`: the objects
    the output and checkpoint URIs may name; `code`: the source the toolkit downloads (None: the image's own
    program); `secrets`: what the job reads from Secrets Manager itself."""

    job_name: Ref
    role_arn: str | None = None
    image: JobImage
    instance_type: str
    instance_count: int
    volume_size_gb: int
    kms_key_arn: str
    output_s3_uri: str | Ref
    output_scope: S3Scope
    hyperparameters: Ref | Mapping[str, str] | None
    channels: Sequence[S3Channel]
    max_runtime_seconds: int
    metric_definitions: Sequence[Mapping[str, str]]
    max_wait_seconds: int | None = None  # set: managed spot training
    checkpoint_s3_uri: str | Ref | None = None
    checkpoint_scope: S3Scope | None = None
    code: S3Scope | None = None
    secrets: Sequence[JobSecret] = ()
    network_isolation: bool = False
    subnet_ids: Sequence[str] = ()
    security_group_ids: Sequence[str] = ()
    tags: Mapping[str, str] = field(default_factory=dict)
    container_entrypoint: Sequence[str] = ()  # set: run the image's own program instead of script mode
    container_arguments: Sequence[str] = ()
    environment: Mapping[str, str] | None = None  # the container's environment (None: the image's own)

    def __post_init__(self) -> None:
        if self.max_wait_seconds is not None and self.max_wait_seconds < self.max_runtime_seconds:
            raise ValueError("max_wait_seconds must be >= max_runtime_seconds")
        if self.max_wait_seconds is not None and self.checkpoint_s3_uri is None:
            raise ValueError("managed spot training needs a checkpoint location to resume after an interruption")
        if (self.checkpoint_s3_uri is None) != (self.checkpoint_scope is None):
            raise ValueError("a checkpoint location needs its scope, and a scope its location")
        if bool(self.subnet_ids) != bool(self.security_group_ids):
            raise ValueError("a VPC config needs subnets and security groups")
        names = [c.name for c in self.channels]
        if len(set(names)) != len(names):
            raise ValueError(f"duplicate channel names {names}")

    @property
    def spot(self) -> bool:
        return self.max_wait_seconds is not None

    @property
    def access(self) -> JobAccess:
        """What the job's role must allow: read each channel, write the output, read and write the checkpoints."""
        checkpoint = (
            [Location("checkpoint", str(self.checkpoint_s3_uri), self.checkpoint_scope)]
            if self.checkpoint_scope is not None
            else []
        )
        vpc = Placement(subnet_ids=self.subnet_ids, security_group_ids=self.security_group_ids)
        return JobAccess(
            reads=(*(Location(f"channel '{c.name}'", str(c.s3_uri), c.scope) for c in self.channels), *checkpoint),
            writes=(Location("output", str(self.output_s3_uri), self.output_scope), *checkpoint),
            key_arn=self.kms_key_arn,
            images=(self.image,),
            code=(self.code,) if self.code is not None else (),
            placement=vpc if self.subnet_ids else None,
            secrets=tuple(self.secrets),
        )

    def with_role(self, role_arn: str) -> TrainingJobRequest:
        return replace(self, role_arn=role_arn)

    def to_asl(self) -> dict[str, Any]:
        params: dict[str, Any] = {}
        _put(params, "TrainingJobName", self.job_name)
        if self.role_arn is None:
            raise ValueError("no execution role: a job step renders the request with its role (with_role)")
        params["RoleArn"] = self.role_arn
        params["AlgorithmSpecification"] = {
            "TrainingImage": self.image.uri,
            "TrainingInputMode": "File",
            "MetricDefinitions": [dict(d) for d in self.metric_definitions],
        }
        if self.container_entrypoint:
            params["AlgorithmSpecification"]["ContainerEntrypoint"] = list(self.container_entrypoint)
            params["AlgorithmSpecification"]["ContainerArguments"] = list(self.container_arguments)
        if self.hyperparameters is not None:
            _put(params, "HyperParameters", self.hyperparameters)
        if self.environment is not None:
            params["Environment"] = dict(self.environment)
        params["InputDataConfig"] = [c.to_asl() for c in self.channels]
        params["OutputDataConfig"] = {}
        _put(params["OutputDataConfig"], "S3OutputPath", self.output_s3_uri)
        params["OutputDataConfig"].update({"KmsKeyId": self.kms_key_arn, "CompressionType": "NONE"})
        params["ResourceConfig"] = {
            "InstanceType": self.instance_type,
            "InstanceCount": self.instance_count,
            "VolumeSizeInGB": self.volume_size_gb,
            "VolumeKmsKeyId": self.kms_key_arn,
        }
        stopping: dict[str, Any] = {"MaxRuntimeInSeconds": self.max_runtime_seconds}
        if self.spot:
            stopping["MaxWaitTimeInSeconds"] = self.max_wait_seconds
            params["EnableManagedSpotTraining"] = True
        params["StoppingCondition"] = stopping
        if self.checkpoint_s3_uri is not None:
            checkpoint: dict[str, Any] = {"LocalPath": "/opt/ml/checkpoints"}
            _put(checkpoint, "S3Uri", self.checkpoint_s3_uri)
            params["CheckpointConfig"] = checkpoint
        params["EnableNetworkIsolation"] = self.network_isolation
        params["EnableInterContainerTrafficEncryption"] = True
        if self.subnet_ids:
            params["VpcConfig"] = {"Subnets": list(self.subnet_ids), "SecurityGroupIds": list(self.security_group_ids)}
        if self.tags:
            params["Tags"] = [{"Key": k, "Value": v} for k, v in sorted(self.tags.items())]
        return params
