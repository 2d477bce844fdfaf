"""The four SageMaker job requests of one pruning run: super-network, tuning-job trial, selection, export."""

from __future__ import annotations

from typing import NamedTuple

from aws_cdk import Aws
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_s3_assets as s3_assets

from ..code_contract.nas import EXPORT_PROGRAM, SELECT_PROGRAM, SUPERNET_PROGRAM, TRIAL_PROGRAM, metric_definitions
from ..config import AppConfig, PruningConfig
from ..shared.bucket_layout import CHECKPOINTS_PREFIX, PRUNING_PREFIX
from ..shared.job_request import Ref, S3Channel, TrainingJobRequest
from ..shared.sagemaker_job_step import JobOutput
from .run_names import job_name, run_uri

ENCODER_CODE_IN_JOB = "encoder_code"  # where the inference handler lands inside the job's code tarball
# Where each job step's result lands in the execution state (the workflow writes them, later jobs read them).
SUPERNET, TUNING, SELECTION, EXPORT = (JobOutput(p) for p in ("$.supernet", "$.tuning", "$.selection", "$.export"))


class PruningJobs(NamedTuple):
    supernet: TrainingJobRequest
    trial: TrainingJobRequest
    select: TrainingJobRequest
    export: TrainingJobRequest


def pruning_job_requests(
    config: AppConfig,
    *,
    bucket: s3.IBucket,
    key: kms.IKey,
    code: s3_assets.Asset,
    image_uri: str,
    job_role: iam.IRole,
    select_role: iam.IRole,
) -> PruningJobs:
    """Every job runs `code` in script mode; outputs go under the run's prefix (the workflow replaces it)."""
    pruning = config.pruning
    script_mode = {"sagemaker_submit_directory": code.s3_object_url, "sagemaker_region": Aws.REGION}
    supernet_uri = Ref(SUPERNET.model_s3_uri)
    common = {
        "image_uri": image_uri,
        "instance_count": 1,
        "volume_size_gb": pruning.volume_size_gb,
        "kms_key_arn": key.key_arn,
        "output_s3_uri": f"s3://{bucket.bucket_name}/{PRUNING_PREFIX}",  # replaced per run
        "metric_definitions": metric_definitions(),
        "tags": dict(config.all_tags),
    }
    bucket_name = bucket.bucket_name
    supernet = TrainingJobRequest(
        job_name=Ref(job_name("supernet")),
        role_arn=job_role.role_arn,
        instance_type=pruning.supernet_instance_type,
        hyperparameters={
            **pruning.supernet_hyperparameters,
            "search-space": pruning.search_space,
            "sagemaker_program": SUPERNET_PROGRAM,
            **script_mode,
        },
        channels=[S3Channel("training", Ref("$.train_data"))],
        max_runtime_seconds=pruning.supernet_max_runtime_hours * 3600,
        checkpoint_s3_uri=Ref(f"States.Format('s3://{bucket_name}/{CHECKPOINTS_PREFIX}{{}}/', $.run.name)"),
        **common,
    )
    trial = TrainingJobRequest(
        job_name=Ref("$.unused"),  # the tuning job names its trials
        role_arn=job_role.role_arn,
        instance_type=pruning.trial_instance_type,
        hyperparameters={
            **pruning.trial_hyperparameters,
            "search-space": pruning.search_space,
            "sagemaker_program": TRIAL_PROGRAM,
            **script_mode,
        },
        channels=[S3Channel("model", supernet_uri), S3Channel("training", Ref("$.train_data"))],
        max_runtime_seconds=pruning.trial_max_runtime_minutes * 60,
        **common,
    )
    select, export = _result_jobs(
        pruning, bucket_name, common=common, script_mode=script_mode, job_role=job_role, select_role=select_role
    )
    return PruningJobs(supernet, trial, select, export)


def _result_jobs(
    pruning: PruningConfig,
    bucket_name: str,
    *,
    common: dict,
    script_mode: dict,
    job_role: iam.IRole,
    select_role: iam.IRole,
) -> tuple[TrainingJobRequest, TrainingJobRequest]:
    """(selection, export): the selection reads the trials through the SageMaker API, the export the front."""
    supernet_uri = Ref(SUPERNET.model_s3_uri)
    select = TrainingJobRequest(
        job_name=Ref(job_name("select")),
        role_arn=select_role.role_arn,
        instance_type=pruning.helper_instance_type,
        hyperparameters={
            "tuning-job-name.$": TUNING.field("name"),
            "output-s3-uri.$": run_uri(bucket_name),
            "search-space": pruning.search_space,
            "objectives": pruning.objectives,
            "sagemaker_program": SELECT_PROGRAM,
            **script_mode,
        },
        channels=[S3Channel("model", supernet_uri)],
        max_runtime_seconds=3600,
        **common,
    )
    export = TrainingJobRequest(
        job_name=Ref(job_name("export")),
        role_arn=job_role.role_arn,
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
        channels=[
            S3Channel("model", supernet_uri),
            S3Channel("pareto", Ref(run_uri(bucket_name, "pareto.json"))),
            S3Channel("training", Ref("$.train_data")),
        ],
        max_runtime_seconds=3600,
        **common,
    )
    return select, export
