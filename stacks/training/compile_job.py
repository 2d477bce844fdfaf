"""The ahead-of-time Neuron compile step's job: the serving backend's own program on the merged model.

It runs as a SageMaker training job in the image the backend's compile step names (stacks/serving/backends/<name>/,
`CompileStep`), with the image's program through `ContainerEntrypoint` / `ContainerArguments` and, where the
program reads one, its environment. Input: the merged model as the `model` channel (/opt/ml/input/data/model).
Output, uncompressed: `models/<training job>/<shape folder>/<compile job>/output/model/` (/opt/ml/model), the
prefix serving.model_prefix names. The backend says what runs and which folder names its shape; this module says
where it runs, under which name, with which channels, limits and placement.

CreateTrainingJob caps each ContainerEntrypoint / ContainerArguments item at 256 characters (100 items), so each
backend's command is `bash -c <script> <$0> <flag> <value> ...`: a short script as the `-c` string, and every flag
and value its own argument.
"""

from __future__ import annotations

from collections.abc import Mapping

from aws_cdk import aws_kms as kms
from aws_cdk import aws_s3 as s3

from ..config import AppConfig
from ..shared.bucket_layout import MODELS_PREFIX
from ..shared.job_access import JobImage
from ..shared.job_request import Ref, S3Channel, TrainingJobRequest
from ..shared.placement import Placement
from .job import bucket_scope, job_placement, runs_offline
from .state_paths import RUN, TRAINING


def compile_job_name() -> Ref:
    """`<run>-n-<API retry>`: as long as the training job's `<run>-<attempt>-<retry>`, under the same IAM scope."""
    return Ref(f"States.Format('{{}}-n-{{}}', {RUN.name}, $$.State.RetryCount)")


def compile_request(
    config: AppConfig,
    *,
    bucket: s3.IBucket,
    key: kms.IKey,
    role_arn: str,
    image: JobImage,
    placement: Placement | None,
) -> TrainingJobRequest:
    """The compile job; the trained model's job name and folder come from the Train step (TRAINING)."""
    serving = config.serving
    step = serving.spec.compile
    return compile_job_request(
        config,
        bucket=bucket,
        key=key,
        role_arn=role_arn,
        image=image,
        placement=placement,
        folder=step.folder(serving),
        entrypoint=step.entrypoint(),
        arguments=step.arguments(serving),
        environment=step.environment(serving, config.source),
    )


def compile_job_request(
    config: AppConfig,
    *,
    bucket: s3.IBucket,
    key: kms.IKey,
    role_arn: str,
    image: JobImage,
    placement: Placement | None,
    folder: str,
    entrypoint: tuple[str, ...],
    arguments: tuple[str, ...],
    environment: Mapping[str, str] | None,
) -> TrainingJobRequest:
    """The job around a backend's program: `folder` is its shape's folder under the merged model."""
    compile_config = config.training.neuron_compile
    vpc = job_placement(config, placement)
    return TrainingJobRequest(
        job_name=compile_job_name(),
        role_arn=role_arn,
        image=image,
        instance_type=compile_config.instance_type,
        instance_count=1,
        volume_size_gb=compile_config.volume_size_gb,
        kms_key_arn=key.key_arn,
        output_s3_uri=Ref(
            f"States.Format('s3://{bucket.bucket_name}/{MODELS_PREFIX}{{}}/{folder}', {TRAINING.job_name})"
        ),
        output_scope=bucket_scope(bucket, MODELS_PREFIX),
        hyperparameters=None,
        channels=[S3Channel("model", Ref(TRAINING.model_s3_uri), bucket_scope(bucket, MODELS_PREFIX))],
        max_runtime_seconds=compile_config.max_runtime_hours * 3600,
        metric_definitions=(),
        network_isolation=runs_offline(config, placement),
        subnet_ids=vpc.subnet_ids if vpc else (),
        security_group_ids=vpc.security_group_ids if vpc else (),
        tags=dict(config.all_tags),
        container_entrypoint=entrypoint,
        container_arguments=arguments,
        environment=environment,
    )
