"""The ahead-of-time Neuron compile step for lmi_neuronx: the LMI image's own `partition` program.

Sources (djl-serving branch 0.30.0-dlc, the last LMI NeuronX image; transformers-neuronx; aws-neuron-sdk):
the image's entry point runs `/opt/djl/partition/partition.py "$@"` for a first argument `partition`
(serving/docker/dockerd-entrypoint.sh L20-23), which reads serving.properties from --model-dir and every
`OPTION_<X>` environment variable as `option.<x>` (serving/docker/partition/properties_manager.py L34-52,
utils.py L106-115). With the default (safetensors) schema it writes the model's config.json with a `neuron`
section (shape and compiler version), the tokenizer, and `compiled/` with the NEFFs, presharded weights and
`VERSION` (engines/python/setup/djl_python/neuron_utils/model_loader.py L269-285, L400-414, L444-494): the
folder LMI then loads without compiling when `option.model_id` names it (serving/docs/lmi/tutorials/
tnx_aot_tutorial.md L143; tests/integration/tests.py L742-757).

Where it runs: DJL 0.30 partitions with `to_neuron()`, which loads the graphs onto NeuronCores (model_loader.py
L408; transformers-neuronx base.py L77-89; the CPU-only `cpu_compile` came with Neuron SDK 2.21, the image has
2.20.1), so the job needs Neuron devices: SageMaker training offers ml.trn1 (NeuronCore-v2, as ml.inf2), and
transformers-neuronx compiles every NEFF for `trn1` also on inf2 (src/transformers_neuronx/compiler.py L136,
L149), so the artifact is the one an inf2 host would build at start-up.

Every setting reaches the program as the environment's own serving.properties in LMI's environment form, so
what is compiled is what is served. `partition.py` exits 0 after logging a bad property (partition.py
L411-416): the script checks `compiled/VERSION` is the image's neuronx-cc before the job counts as done, drops
the serving.properties the program writes beside the model (in a mounted model folder it would override the
endpoint's environment) and copies `generation_config.json`, which `--skip-copy` leaves out.
"""

from __future__ import annotations

from aws_cdk import aws_kms as kms
from aws_cdk import aws_s3 as s3

from ..config import AppConfig
from ..config.serving_properties import as_environment, render
from ..shared.bucket_layout import MODELS_PREFIX
from ..shared.job_access import JobImage
from ..shared.job_request import Ref, S3Channel, TrainingJobRequest
from ..shared.placement import Placement
from .compile_job import compile_job_name
from .job import bucket_scope, job_placement, runs_offline
from .state_paths import TRAINING

MODEL_CHANNEL = "/opt/ml/input/data/model"
OUTPUT_DIR = "/opt/ml/model"
IMAGE_ENTRYPOINT = "/usr/local/bin/dockerd-entrypoint.sh"  # the LMI image's ENTRYPOINT (pytorch-inf2.Dockerfile L60)
SCRIPT_NAME = "lmi-partition"  # the script's $0


# The `-c` script. $1 is the neuronx-cc version the image pins, the rest the image's program and its arguments:
# run them, then check the compiled artifact's VERSION is that compiler (partition.py exits 0 after logging a bad
# property), drop the serving.properties the program writes beside the model (mounted at /opt/ml/model it would
# override the endpoint's environment) and copy generation_config.json, which --skip-copy leaves out.
PARTITION_SCRIPT = (
    'set -eo pipefail; "${@:2}"; cd /opt/ml; v=$(<model/compiled/VERSION); '
    '[ "${v%%+*}" = "$1" ] || { echo "neuronx-cc $v, not $1" >&2; exit 3; }; '
    "rm -f model/serving.properties; g=input/data/model/generation_config.json; [ ! -f $g ] || cp $g model/"
)


def partition_entrypoint() -> tuple[str, ...]:
    """`bash -c <script> <$0>`: the container's program; the arguments become the script's "$@"."""
    return ("/bin/bash", "-c", PARTITION_SCRIPT, SCRIPT_NAME)


def partition_arguments(compiler_version: str) -> tuple[str, ...]:
    """The compiler version the script checks, then the image's program and partition.py's flags
    (serving/docker/partition/partition.py L372-407), one item each."""
    return (
        compiler_version,
        IMAGE_ENTRYPOINT,
        "partition",  # dockerd-entrypoint.sh L20: run partition.py
        "--model-dir",  # the properties folder (L372-378); none there, the environment carries them
        MODEL_CHANNEL,
        "--model-id",  # the merged model (L379-382): the `model` channel
        MODEL_CHANNEL,
        "--engine",  # read after partitioning (partition.py L216)
        "Python",
        "--save-mp-checkpoint-path",  # a local folder (L384-388): SageMaker uploads /opt/ml/model
        OUTPUT_DIR,
        "--skip-copy",  # else the source config.json overwrites the one with the `neuron` section (L128-139)
    )


def partition_environment(config: AppConfig) -> dict[str, str]:
    """OPTION_<KEY> for each line of the rendered serving.properties (the environment form LMI reads)."""
    serving = config.serving
    return as_environment(render(serving.lmi, source=config.source, path="serving.lmi"))


def lmi_compile_request(
    config: AppConfig,
    *,
    bucket: s3.IBucket,
    key: kms.IKey,
    role_arn: str,
    image: JobImage,
    placement: Placement | None,
) -> TrainingJobRequest:
    """The partition job; the trained model's job name and folder come from the Train step (TRAINING)."""
    compile_config = config.training.neuron_compile
    serving = config.serving
    folder = serving.spec.compiled_folder(serving)
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
        container_entrypoint=partition_entrypoint(),
        container_arguments=partition_arguments(serving.spec.compiler_version(serving)),
        environment=partition_environment(config),
    )
