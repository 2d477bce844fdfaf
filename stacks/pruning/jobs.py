"""The four SageMaker job requests of one pruning run: super-network, tuning-job trial, selection, export."""

from __future__ import annotations

from collections.abc import Mapping
from typing import NamedTuple

from aws_cdk import Aws
from aws_cdk import aws_kms as kms
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_s3_assets as s3_assets

from ..code_contract.nas import EXPORT_PROGRAM, SELECT_PROGRAM, SUPERNET_PROGRAM, TRIAL_PROGRAM, metric_definitions
from ..config.pruning import PruningConfig
from ..shared.bucket_layout import CHECKPOINTS_PREFIX, PRUNING_DATASETS_PREFIX, PRUNING_PREFIX
from ..shared.job_access import JobImage, S3Scope
from ..shared.job_request import Ref, S3Channel, TrainingJobRequest
from ..shared.sagemaker_job_step import JobOutput
from .run_names import job_name, run_uri

ENCODER_CODE_IN_JOB = "encoder_code"  # where the inference handler lands inside the job's code tarball
# Where each job step's result lands in the execution state (the workflow writes them, later jobs read them).
SUPERNET, TUNING, SELECTION, EXPORT = (JobOutput(p) for p in ("$.supernet", "$.tuning", "$.selection", "$.export"))
PREFIX_REASONS = {  # why the jobs' roles reach every object under these prefixes
    PRUNING_DATASETS_PREFIX: "The super-network and trial jobs read the dataset given per execution, any folder "
    "under pruning-datasets/; read only.",
    PRUNING_PREFIX: "Each run writes and reads back its jobs' outputs, trials, Pareto front and models under "
    "pruning/<run>/; the run name is generated per execution.",
    CHECKPOINTS_PREFIX: "Super-network checkpoints are written and read back on resume under checkpoints/<run>/; "
    "the run name is generated per execution.",
}


class PruningJobs(NamedTuple):
    supernet: TrainingJobRequest
    trial: TrainingJobRequest
    select: TrainingJobRequest
    export: TrainingJobRequest


def pruning_job_requests(
    pruning: PruningConfig,
    *,
    tags: Mapping[str, str],
    bucket: s3.IBucket,
    key: kms.IKey,
    code: s3_assets.Asset,
    image: JobImage,
    job_role_arn: str,
    select_role_arn: str,
) -> PruningJobs:
    """Every job runs `code` in script mode; outputs go under the run's prefix (the workflow replaces it)."""

    def scope(prefix: str) -> S3Scope:
        return S3Scope.under(bucket, prefix, PREFIX_REASONS[prefix])

    data = S3Channel("training", Ref("$.train_data"), scope(PRUNING_DATASETS_PREFIX))
    supernet_model = S3Channel("model", Ref(SUPERNET.model_s3_uri), scope(PRUNING_PREFIX))
    script_mode = {"sagemaker_submit_directory": code.s3_object_url, "sagemaker_region": Aws.REGION}
    common = {
        "image": image,
        "instance_count": 1,
        "volume_size_gb": pruning.volume_size_gb,
        "kms_key_arn": key.key_arn,
        "output_s3_uri": f"s3://{bucket.bucket_name}/{PRUNING_PREFIX}",  # replaced per run
        "output_scope": scope(PRUNING_PREFIX),
        "code": S3Scope.asset(code),
        "metric_definitions": metric_definitions(),
        "tags": dict(tags),
    }
    bucket_name = bucket.bucket_name
    supernet, trial = _search_jobs(
        pruning,
        common=common,
        script_mode=script_mode,
        role_arn=job_role_arn,
        channels=(supernet_model, data),
        checkpoints=(
            Ref(f"States.Format('s3://{bucket_name}/{CHECKPOINTS_PREFIX}{{}}/', $.run.name)"),
            scope(CHECKPOINTS_PREFIX),
        ),
    )
    select, export = _result_jobs(
        pruning,
        bucket_name,
        common=common,
        script_mode=script_mode,
        roles=(job_role_arn, select_role_arn),
        channels=(
            supernet_model,
            data,
            S3Channel("pareto", Ref(run_uri(bucket_name, "pareto.json")), scope(PRUNING_PREFIX)),
        ),
    )
    return PruningJobs(supernet, trial, select, export)


def _search_jobs(
    pruning: PruningConfig,
    *,
    common: dict,
    script_mode: dict,
    role_arn: str,
    channels: tuple[S3Channel, S3Channel],
    checkpoints: tuple[Ref, S3Scope],
) -> tuple[TrainingJobRequest, TrainingJobRequest]:
    """(super-network, trial) with `channels` (super-network model, data): the super-network writes checkpoints
    under `checkpoints` (URI, scope) and reads them back on resume; a trial is short and keeps none."""
    supernet_model, data = channels
    checkpoint_uri, checkpoint_scope = checkpoints
    supernet = TrainingJobRequest(
        job_name=Ref(job_name("supernet")),
        role_arn=role_arn,
        instance_type=pruning.supernet_instance_type,
        hyperparameters={
            **pruning.supernet_hyperparameters,
            "search-space": pruning.search_space,
            "sagemaker_program": SUPERNET_PROGRAM,
            **script_mode,
        },
        channels=[data],
        max_runtime_seconds=pruning.supernet_max_runtime_hours * 3600,
        checkpoint_s3_uri=checkpoint_uri,
        checkpoint_scope=checkpoint_scope,
        **common,
    )
    trial = TrainingJobRequest(
        job_name=Ref("$.unused"),  # the tuning job names its trials
        role_arn=role_arn,
        instance_type=pruning.trial_instance_type,
        hyperparameters={
            **pruning.trial_hyperparameters,
            "search-space": pruning.search_space,
            "sagemaker_program": TRIAL_PROGRAM,
            **script_mode,
        },
        channels=[supernet_model, data],
        max_runtime_seconds=pruning.trial_max_runtime_minutes * 60,
        **common,
    )
    return supernet, trial


def _result_jobs(
    pruning: PruningConfig,
    bucket_name: str,
    *,
    common: dict,
    script_mode: dict,
    roles: tuple[str, str],
    channels: tuple[S3Channel, S3Channel, S3Channel],
) -> tuple[TrainingJobRequest, TrainingJobRequest]:
    """(selection, export) with `roles` (job role, selection role) and `channels` (super-network, data, front):
    the selection reads the trials through the SageMaker API, the export the front."""
    job_role_arn, select_role_arn = roles
    supernet_model, data, pareto = channels
    select = TrainingJobRequest(
        job_name=Ref(job_name("select")),
        role_arn=select_role_arn,
        instance_type=pruning.helper_instance_type,
        hyperparameters={
            "tuning-job-name.$": TUNING.field("name"),
            "output-s3-uri.$": run_uri(bucket_name),
            "search-space": pruning.search_space,
            "objectives": pruning.objectives,
            "sagemaker_program": SELECT_PROGRAM,
            **script_mode,
        },
        channels=[supernet_model],
        max_runtime_seconds=3600,
        **common,
    )
    export = TrainingJobRequest(
        job_name=Ref(job_name("export")),
        role_arn=job_role_arn,
        instance_type=pruning.helper_instance_type,
        hyperparameters={
            "max-error-increase": str(pruning.max_error_increase),
            "minimise": pruning.minimise,
            "quantize": pruning.quantize,
            "inference-code-dir": ENCODER_CODE_IN_JOB,
            "base-output-s3-uri.$": run_uri(bucket_name, "base/model.tar.gz"),
            "sagemaker_program": EXPORT_PROGRAM,
            **script_mode,
        },
        # training: the super-network's data, so the export re-measures the compressed model's validation
        # error on the split recorded in nas_supernet.json (export_subnetwork.py --data-dir)
        channels=[supernet_model, pareto, data],
        max_runtime_seconds=3600,
        **common,
    )
    return select, export
