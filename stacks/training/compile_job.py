"""The ahead-of-time Neuron compile step: `optimum-cli export neuron` of the merged model in the serving image.

It runs as a SageMaker training job on a CPU instance (training jobs cannot use ml.inf2; `--instance_type inf2`
makes the export target Inferentia2 without the device), with the vLLM Neuron image's own program through
`ContainerEntrypoint`. Input: the merged model as the `model` channel. Output, uncompressed:
`models/<training job>/neuron/bs<B>-seq<S>-tp<T>/<compile job>/output/model/`, the prefix serving.model_prefix
names. `generation_config.json` is copied beside the export, which leaves it out.

CreateTrainingJob caps each ContainerEntrypoint / ContainerArguments item at 256 characters (100 items), so the
command is `bash -c <script> neuron-export <flag> <value> ...`: the short script as the `-c` string, which runs
`optimum-cli export neuron "$@"`, and every flag and value its own argument.
"""

from __future__ import annotations

from aws_cdk import aws_kms as kms
from aws_cdk import aws_s3 as s3

from ..config import AppConfig
from ..shared.bucket_layout import MODELS_PREFIX
from ..shared.job_access import JobImage
from ..shared.job_request import Ref, S3Channel, TrainingJobRequest
from ..shared.placement import Placement
from .job import bucket_scope, job_placement, runs_offline
from .state_paths import RUN, TRAINING

MODEL_CHANNEL = "/opt/ml/input/data/model"
OUTPUT_DIR = "/opt/ml/model"


GENERATION_CONFIG = f"{MODEL_CHANNEL}/generation_config.json"
# The `-c` script: export with the arguments after it, then copy the generation config the export leaves out.
EXPORT_SCRIPT = (
    'set -euo pipefail; optimum-cli export neuron "$@"; '
    f"if [ -f {GENERATION_CONFIG} ]; then cp {GENERATION_CONFIG} {OUTPUT_DIR}/; fi"
)
SCRIPT_NAME = "neuron-export"  # the script's $0 (bash -c takes the first word after the script as $0)


def export_entrypoint() -> tuple[str, ...]:
    """`bash -c <script> <$0>`: the container's program; the arguments become the script's "$@"."""
    return ("/bin/bash", "-c", EXPORT_SCRIPT, SCRIPT_NAME)


def export_arguments(config: AppConfig) -> tuple[str, ...]:
    """`optimum-cli export neuron`'s arguments, one item each: serving.neuron's shape, for Inferentia2."""
    return (
        "--model",
        MODEL_CHANNEL,
        "--task",
        "text-generation",
        *config.serving.neuron.export_arguments(),
        "--instance_type",
        "inf2",
        OUTPUT_DIR,
    )


def compile_job_name() -> Ref:
    """`<run>-n-<API retry>`: as long as the training job's `<run>-<attempt>-<retry>`, under the same IAM scope."""
    return Ref(f"States.Format('{{}}-n-{{}}', {RUN.name}, $$.State.RetryCount)")


def neuron_compile_request(
    config: AppConfig,
    *,
    bucket: s3.IBucket,
    key: kms.IKey,
    role_arn: str,
    image: JobImage,
    placement: Placement | None,
) -> TrainingJobRequest:
    """The compile job; the trained model's job name and folder come from the Train step (TRAINING)."""
    compile_config = config.training.neuron_compile
    folder = config.serving.neuron.compiled_folder
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
        container_entrypoint=export_entrypoint(),
        container_arguments=export_arguments(config),
    )
