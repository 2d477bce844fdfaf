"""The CreateTrainingJob request of one QLoRA run: image, channels, output, spot, VPC, from the config."""

from __future__ import annotations

from collections.abc import Mapping

from aws_cdk import aws_kms as kms
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_s3_assets as s3_assets

from ..code_contract.qlora import metric_definitions
from ..config.model_catalog import BaseModel
from ..config.training import TrainingConfig
from ..shared.bucket_layout import BASE_MODELS_PREFIX, CHECKPOINTS_PREFIX, DATASETS_PREFIX, MODELS_PREFIX
from ..shared.job_access import JobImage, S3Scope
from ..shared.job_request import Ref, S3Channel, TrainingJobRequest
from .base_access import hub_token_secrets, job_environment
from .props import JobNetwork
from .state_paths import RUN, TRAIN_DATA
from .workflow import job_name_expression

CODE_CHANNEL_DIR = "/opt/ml/input/data/code/"  # an isolated container cannot fetch its code itself
# Why a training-workflow job may reach every object under each prefix it names (cdk-nag's IAM5).
PREFIX_REASONS = {
    DATASETS_PREFIX: "The training job reads the dataset it is given, any object under datasets/ (the channel is "
    "chosen per execution); nothing else in the bucket.",
    BASE_MODELS_PREFIX: "Network-isolated jobs read the base model from a `model` channel under base-models/; read "
    "only.",
    CHECKPOINTS_PREFIX: "Checkpoints are written and read back on resume under checkpoints/<run>/; the run name is "
    "generated per execution.",
    MODELS_PREFIX: "Models are written under models/<job-name>/ (a compiled one beside its merged model, which the "
    "compile job reads); job names are generated per execution, so the prefix is the narrowest fixed scope.",
}


def bucket_scope(bucket: s3.IBucket, prefix: str) -> S3Scope:
    """Every object under one of the bucket's top-level prefixes, for a location chosen per execution."""
    return S3Scope.under(bucket, prefix, PREFIX_REASONS[prefix])


def training_job_request(
    training: TrainingConfig,
    *,
    base_model: BaseModel | None,
    tags: Mapping[str, str],
    network: JobNetwork,
    bucket: s3.IBucket,
    key: kms.IKey,
    code: s3_assets.Asset,
    role_arn: str | None,
    image: JobImage,
) -> tuple[TrainingJobRequest, str]:
    """(request, sagemaker_submit_directory); isolated mode: the code comes as a channel. `base_model`: the
    catalog record the job checks the weights it loads against (config/models/), or None."""
    isolated = network.isolated_mode
    vpc = network.vpc
    channels = [S3Channel("training", Ref(TRAIN_DATA), bucket_scope(bucket, DATASETS_PREFIX))]
    if training.base_model_key:
        channels.append(
            S3Channel(
                "model",
                f"s3://{bucket.bucket_name}/{training.base_model_key}",
                bucket_scope(bucket, BASE_MODELS_PREFIX),
            )
        )
    submit_directory = code.s3_object_url
    if isolated:  # the toolkit extracts a local sourcedir tarball as it would download an S3 one
        channels.append(S3Channel("code", code.s3_object_url, S3Scope.asset(code)))
        submit_directory = CODE_CHANNEL_DIR + code.s3_object_key
    request = TrainingJobRequest(
        job_name=job_name_expression(),
        role_arn=role_arn,
        image=image,
        instance_type=training.instance_type,
        instance_count=training.instance_count,
        volume_size_gb=training.volume_size_gb,
        kms_key_arn=key.key_arn,
        output_s3_uri=f"s3://{bucket.bucket_name}/{MODELS_PREFIX}",
        output_scope=bucket_scope(bucket, MODELS_PREFIX),
        code=S3Scope.asset(code),
        secrets=hub_token_secrets(training),
        hyperparameters=Ref(RUN.hyperparameters),
        channels=channels,
        max_runtime_seconds=training.max_runtime_hours * 3600,
        max_wait_seconds=training.max_wait_seconds,
        checkpoint_s3_uri=Ref(f"States.Format('s3://{bucket.bucket_name}/{CHECKPOINTS_PREFIX}{{}}/', {RUN.name})"),
        checkpoint_scope=bucket_scope(bucket, CHECKPOINTS_PREFIX),
        metric_definitions=metric_definitions(),
        network_isolation=network.offline,
        subnet_ids=vpc.subnet_ids if vpc else (),
        security_group_ids=vpc.security_group_ids if vpc else (),
        tags=dict(tags),
        environment=job_environment(training, base_model),
    )
    return request, submit_directory
