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

from ..config.training import NeuronCompileConfig
from ..shared.bucket_layout import MODELS_PREFIX
from ..shared.job_access import JobImage
from ..shared.job_request import Ref, S3Channel, TrainingJobRequest
from .job import bucket_scope
from .props import CompileFacts, JobNetwork
from .state_paths import RUN, TRAINING


def compile_job_name() -> Ref:
    """`<run>-n-<API retry>`: as long as the training job's `<run>-<attempt>-<retry>`, under the same IAM scope."""
    return Ref(f"States.Format('{{}}-n-{{}}', {RUN.name}, $$.State.RetryCount)")


def compile_request(
    step: CompileFacts,
    settings: NeuronCompileConfig,
    *,
    tags: Mapping[str, str],
    network: JobNetwork,
    bucket: s3.IBucket,
    key: kms.IKey,
    role_arn: str,
    image: JobImage,
) -> TrainingJobRequest:
    """The job around the backend's program (`step`) on training.neuron_compile's host (`settings`); the trained
    model's job name and folder come from the Train step (TRAINING), `step.folder` names its shape's folder."""
    vpc = network.vpc
    return TrainingJobRequest(
        job_name=compile_job_name(),
        role_arn=role_arn,
        image=image,
        instance_type=settings.instance_type,
        instance_count=1,
        volume_size_gb=settings.volume_size_gb,
        kms_key_arn=key.key_arn,
        output_s3_uri=Ref(
            f"States.Format('s3://{bucket.bucket_name}/{MODELS_PREFIX}{{}}/{step.folder}', {TRAINING.job_name})"
        ),
        output_scope=bucket_scope(bucket, MODELS_PREFIX),
        hyperparameters=None,
        channels=[S3Channel("model", Ref(TRAINING.model_s3_uri), bucket_scope(bucket, MODELS_PREFIX))],
        max_runtime_seconds=settings.max_runtime_hours * 3600,
        metric_definitions=(),
        network_isolation=network.offline,
        subnet_ids=vpc.subnet_ids if vpc else (),
        security_group_ids=vpc.security_group_ids if vpc else (),
        tags=dict(tags),
        container_entrypoint=step.entrypoint,
        container_arguments=step.arguments,
        environment=step.environment,
    )
