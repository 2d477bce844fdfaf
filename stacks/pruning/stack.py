"""NAS structural pruning of an encoder: the state machine that produces the pruned model, and the endpoints.

The state machine (stacks/pruning/workflow.py) runs `training_code/nas` as SageMaker jobs (stacks/pruning/jobs.py):
super-network fine-tuning, a Random-search tuning job whose trials run `evaluate_subnetwork.py` (parameter ranges
from `pruning/search_space.py`), the Pareto selection (`select_tuning_job.py`) and the export (`export_models.py`).
The base and the pruned model are served, each optional, by the generic `SageMakerEndpoint` with the
Hugging Face PyTorch inference container and `serving_artifacts/encoder_classifier/code/inference.py`
(stacks/pruning/endpoints.py).
"""

from __future__ import annotations

from pathlib import Path

from aws_cdk import CfnOutput, Stack
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_s3_assets as s3_assets
from aws_cdk import aws_sns as sns
from aws_cdk import aws_ssm as ssm
from aws_cdk import aws_stepfunctions as sfn
from constructs import Construct

from ..code_contract.nas import OBJECTIVE_METRIC
from ..code_contract.nas import parameter_ranges as nas_parameter_ranges
from ..config import ConfigError
from ..config.pruning import MAX_PRUNING_PREFIX, PruningConfig
from ..paths import ENCODER_CODE, NAS_CODE
from ..shared.acknowledgments import Wildcard, acknowledge_wildcards
from ..shared.assets import build_content_addressed
from ..shared.container_images import ContainerImages
from ..shared.environment import EnvironmentFacts
from ..shared.job_access import JobImage
from ..shared.job_role import SageMakerJobRole
from ..shared.sagemaker_endpoint import SageMakerEndpoint
from ..shared.sagemaker_job_step import job_arn
from .endpoints import encoder_endpoints
from .jobs import ENCODER_CODE_IN_JOB, PruningJobs, pruning_job_requests
from .workflow import PruningWorkflow

TRAINING_IMAGE = "hf_pytorch_training_gpu"


def parameter_ranges(pruning: PruningConfig) -> dict:
    """The tuning job's ParameterRanges for the configured search space and model dimensions."""
    return nas_parameter_ranges(pruning.search_space, pruning.num_layers, pruning.num_heads, pruning.intermediate_size)


def pruning_prefix(pruning: PruningConfig, environment: EnvironmentFacts) -> str:
    """What every pruning job name starts with (the IAM scope): pruning.job_name_prefix, else `<app>-<env>`,
    short enough for a tuning job's 32-character name."""
    prefix = pruning.job_name_prefix or environment.name
    if len(prefix) > MAX_PRUNING_PREFIX:
        raise ConfigError(
            environment.source,
            "pruning.job_name_prefix",
            f"got {prefix!r} (<app_name>-<env>); at most {MAX_PRUNING_PREFIX} characters (tuning job names are "
            "limited to 32): set a shorter one",
        )
    return prefix


def code_tarball() -> Path:
    """training_code/nas plus the inference handler, which the export job copies into each model's code/."""
    extra = {f"{ENCODER_CODE_IN_JOB}/{p.name}": p.read_bytes() for p in sorted(ENCODER_CODE.iterdir()) if p.is_file()}
    return build_content_addressed(NAS_CODE, extra_files=extra)


class PruningStack(Stack):
    """State machine + job roles + SNS topic + SSM model pointer, and the optional base/pruned endpoints."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        pruning: PruningConfig,
        environment: EnvironmentFacts,
        job_name_prefix: str,
        bucket: s3.IBucket,
        key: kms.IKey,
        **kwargs,
    ) -> None:
        """`job_name_prefix`: pruning_prefix's, which every job name and the roles' IAM scopes start with."""
        super().__init__(scope, construct_id, **kwargs)
        self.job_name_prefix = job_name_prefix
        endpoints = {
            name: cfg for name, cfg in (("Base", pruning.base_endpoint), ("Pruned", pruning.pruned_endpoint)) if cfg
        }
        images = ContainerImages(
            self, "Images", names=[TRAINING_IMAGE, *sorted({cfg.image for cfg in endpoints.values()})]
        )
        images.require_region(environment)
        code = s3_assets.Asset(self, "NasCode", path=str(code_tarball()))
        job_role, select_role = self._job_roles()
        self.topic = sns.Topic(self, "Topic", master_key=key, enforce_ssl=True)
        self.model_parameter = ssm.StringParameter(
            self,
            "ModelParameter",
            parameter_name=f"/{environment.app_name}/{environment.env_name}/pruning/model-s3-uri",
            string_value="none",  # RecordModel overwrites it with the pruned model.tar.gz
            description=f"{environment.name}: S3 URI of the latest pruned encoder model.tar.gz",
        )
        jobs = pruning_job_requests(
            pruning,
            tags=environment.tags,
            bucket=bucket,
            key=key,
            code=code,
            image=JobImage(
                images.uri(TRAINING_IMAGE, pruning.image_uri), images.repository_arn(TRAINING_IMAGE, pruning.image_uri)
            ),
            job_role_arn=job_role.role_arn,
            select_role_arn=select_role.role_arn,
        )
        self.parameter_ranges = parameter_ranges(pruning)
        self.state_machine = self._workflow(pruning, jobs, bucket=bucket, key=key)
        self.endpoints: dict[str, SageMakerEndpoint] = {}
        if endpoints:
            self.endpoints = encoder_endpoints(
                self,
                endpoints,
                environment_name=environment.name,
                bucket=bucket,
                key=key,
                images=images,
                topic=self.topic,
            )
        self._outputs()

    def _workflow(
        self, pruning: PruningConfig, jobs: PruningJobs, *, bucket: s3.IBucket, key: kms.IKey
    ) -> sfn.StateMachine:
        """The run's state machine: its jobs, the tuning job's search and the shell (topic, model parameter)."""
        workflow = PruningWorkflow(
            self,
            "Workflow",
            bucket_name=bucket.bucket_name,
            run_prefix=self.job_name_prefix,
            jobs=jobs,
            parameter_ranges=self.parameter_ranges,
            objective_metric=OBJECTIVE_METRIC,
            max_jobs=pruning.max_jobs,
            max_parallel_jobs=pruning.max_parallel_jobs,
            topic=self.topic,
            model_parameter=self.model_parameter,
            log_retention_days=pruning.log_retention_days,
            key=key,
        )
        return workflow.state_machine

    def _job_roles(self) -> tuple[SageMakerJobRole, SageMakerJobRole]:
        """(super-network/trial/export role, selection role), each extended by the steps that run as it; only
        the selection role may list the trials."""
        prefix = self.job_name_prefix
        job_role = SageMakerJobRole(
            self,
            "JobRole",
            job_name_prefix=prefix,
            description="SageMaker execution role of the NAS pruning jobs (super-network, trials, export)",
            policy_description="NAS pruning jobs: code, pruning-datasets/, pruning/, checkpoints/, data key",
        )
        select_role = SageMakerJobRole(
            self,
            "SelectRole",
            job_name_prefix=prefix,
            description="SageMaker execution role of the NAS Pareto selection job",
            policy_description="NAS Pareto selection job: code, pruning/, data key",
        )
        select_api = iam.ManagedPolicy(
            self,
            "SelectApiPolicy",
            description="Pareto selection job: read the trials of this environment's tuning jobs",
            roles=[select_role.role],
            statements=[
                iam.PolicyStatement(
                    sid="ListTrials",
                    actions=["sagemaker:ListTrainingJobsForHyperParameterTuningJob"],
                    resources=[job_arn(self, "hyper-parameter-tuning-job", prefix)],
                ),
                iam.PolicyStatement(
                    sid="DescribeTrials",
                    actions=["sagemaker:DescribeTrainingJob"],
                    resources=[job_arn(self, "training-job", prefix)],
                ),
            ],
        )
        acknowledge_wildcards(
            select_api,
            [
                Wildcard(
                    job_arn(self, kind, prefix),
                    "Trial names are generated by the tuning job, tuning job names per execution; the selection job "
                    "lists and describes only jobs whose names start with this environment's pruning prefix.",
                )
                for kind in ("hyper-parameter-tuning-job", "training-job")
            ],
        )
        return job_role, select_role

    def _outputs(self) -> None:
        CfnOutput(self, "StateMachineArn", value=self.state_machine.state_machine_arn)
        CfnOutput(self, "TopicArn", value=self.topic.topic_arn)
        CfnOutput(self, "ModelParameterName", value=self.model_parameter.parameter_name)
        for name, endpoint in self.endpoints.items():
            CfnOutput(self, f"{name}EndpointName", value=endpoint.endpoint_name, description="make loadtest")
