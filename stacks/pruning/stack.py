"""NAS structural pruning of an encoder: the state machine that produces the pruned model, and the endpoints.

The state machine (stacks/pruning_workflow.py) runs `training_code/nas` as SageMaker jobs: super-network
fine-tuning, a Random-search tuning job whose trials run `evaluate_subnetwork.py` (parameter ranges from
`nas_search_space.py`), the Pareto selection (`select_tuning_job.py`) and the export (`export_models.py`).
The base and the pruned model are served, each optional, by the generic `SageMakerEndpoint` with the
Hugging Face PyTorch inference container and `serving_artifacts/encoder_classifier/code/inference.py`.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from aws_cdk import Aws, CfnOutput, Stack
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_s3_assets as s3_assets
from aws_cdk import aws_sns as sns
from aws_cdk import aws_ssm as ssm
from constructs import Construct

from ..code_contract.nas import metric_definitions
from ..code_contract.nas import parameter_ranges as nas_parameter_ranges
from ..config import AppConfig, ConfigError
from ..config.endpoint import DataCaptureConfig
from ..config.pruning import MAX_PRUNING_PREFIX, EncoderEndpointConfig, PruningConfig
from ..paths import ENCODER_CODE, NAS_CODE
from ..shared.assets import build_content_addressed
from ..shared.bucket_layout import CHECKPOINTS_PREFIX, DATASETS_PREFIX, PRUNING_PREFIX
from ..shared.container_images import ContainerImages
from ..shared.job_request import Ref, S3Channel, TrainingJobRequest
from ..shared.job_role import TrainingRole
from ..shared.sagemaker_endpoint import SageMakerEndpoint, allow_alarm_notifications, endpoint_runtime_statements
from .workflow import PruningWorkflow, job_name, run_uri

ENCODER_CODE_IN_JOB = "encoder_code"  # where the inference handler lands inside the job's code tarball
TRAINING_IMAGE = "hf_pytorch_training_gpu"


def parameter_ranges(pruning: PruningConfig) -> dict:
    """The tuning job's ParameterRanges from the code's own search-space module (one definition)."""
    return nas_parameter_ranges(pruning.search_space, pruning.num_layers, pruning.num_heads, pruning.intermediate_size)


def pruning_prefix(config: AppConfig) -> str:
    prefix = config.pruning.job_name_prefix or f"{config.app_name}-{config.env_name}"
    if len(prefix) > MAX_PRUNING_PREFIX:
        raise ConfigError(
            config.source, "pruning.job_name_prefix",
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
        config: AppConfig,
        bucket: s3.IBucket,
        key: kms.IKey,
        **kwargs,
    ) -> None:
        super().__init__(scope, construct_id, **kwargs)
        pruning = config.pruning
        if config.network.isolated:
            raise ConfigError(
                config.source, "pruning.enabled",
                "the Pruning stack does not support network.isolated yet (its jobs and endpoints would run outside "
                "the VPC); keep pruning off in isolated environments",
            )
        prefix = pruning_prefix(config)
        endpoints = {
            name: cfg for name, cfg in (("Base", pruning.base_endpoint), ("Pruned", pruning.pruned_endpoint)) if cfg
        }
        images = ContainerImages(
            self, "Images", names=[TRAINING_IMAGE, *sorted({cfg.image for cfg in endpoints.values()})]
        )
        images.require_region(config)
        code = s3_assets.Asset(self, "NasCode", path=str(code_tarball()))

        job_role = TrainingRole(
            self,
            "JobRole",
            bucket=bucket,
            key=key,
            code=code,
            job_name_prefix=prefix,
            read_prefixes=(DATASETS_PREFIX, PRUNING_PREFIX, CHECKPOINTS_PREFIX),
            write_prefixes=(PRUNING_PREFIX, CHECKPOINTS_PREFIX),
            image_repository_arn=images.repository_arn(TRAINING_IMAGE, pruning.image_uri),
            vpc=False,
        )
        select_role = TrainingRole(
            self,
            "SelectRole",
            bucket=bucket,
            key=key,
            code=code,
            job_name_prefix=prefix,
            read_prefixes=(PRUNING_PREFIX,),
            write_prefixes=(PRUNING_PREFIX,),
            image_repository_arn=images.repository_arn(TRAINING_IMAGE, pruning.image_uri),
            vpc=False,
        )
        iam.ManagedPolicy(
            self,
            "SelectApiPolicy",
            description="Pareto selection job: read the trials of this environment's tuning jobs",
            roles=[select_role.role],
            statements=[
                iam.PolicyStatement(
                    sid="ListTrials",
                    actions=["sagemaker:ListTrainingJobsForHyperParameterTuningJob"],
                    resources=[self._arn("hyper-parameter-tuning-job", prefix)],
                ),
                iam.PolicyStatement(
                    sid="DescribeTrials",
                    actions=["sagemaker:DescribeTrainingJob"],
                    resources=[self._arn("training-job", prefix)],
                ),
            ],
        )

        self.topic = sns.Topic(self, "Topic", master_key=key, enforce_ssl=True)
        self.model_parameter = ssm.StringParameter(
            self,
            "ModelParameter",
            parameter_name=f"/{config.app_name}/{config.env_name}/pruning/model-s3-uri",
            string_value="none",  # RecordModel overwrites it with the pruned model.tar.gz
            description=f"{config.app_name}-{config.env_name}: S3 URI of the latest pruned encoder model.tar.gz",
        )

        image_uri = images.uri(TRAINING_IMAGE, pruning.image_uri)
        script_mode = {"sagemaker_submit_directory": code.s3_object_url, "sagemaker_region": Aws.REGION}
        supernet_uri = Ref("$.supernet.model_s3_uri")
        common = {
            "image_uri": image_uri,
            "instance_count": 1,
            "volume_size_gb": pruning.volume_size_gb,
            "kms_key_arn": key.key_arn,
            "output_s3_uri": f"s3://{bucket.bucket_name}/{PRUNING_PREFIX}",  # replaced per run
            "metric_definitions": metric_definitions(),
            "tags": dict(config.all_tags),
        }
        supernet = TrainingJobRequest(
            job_name=Ref(job_name("supernet")),
            role_arn=job_role.role.role_arn,
            instance_type=pruning.supernet_instance_type,
            hyperparameters={
                **pruning.supernet_hyperparameters,
                "search-space": pruning.search_space,
                "sagemaker_program": "train_supernetwork.py",
                **script_mode,
            },
            channels=[S3Channel("training", Ref("$.train_data"))],
            max_runtime_seconds=pruning.supernet_max_runtime_hours * 3600,
            checkpoint_s3_uri=Ref(
                f"States.Format('s3://{bucket.bucket_name}/{CHECKPOINTS_PREFIX}{{}}/', $.run.name)"
            ),
            **common,
        )
        trial = TrainingJobRequest(
            job_name=Ref("$.unused"),  # the tuning job names its trials
            role_arn=job_role.role.role_arn,
            instance_type=pruning.trial_instance_type,
            hyperparameters={
                "search-space": pruning.search_space,
                "sagemaker_program": "evaluate_subnetwork.py",
                **script_mode,
            },
            channels=[S3Channel("model", supernet_uri), S3Channel("training", Ref("$.train_data"))],
            max_runtime_seconds=pruning.trial_max_runtime_minutes * 60,
            **common,
        )
        select = TrainingJobRequest(
            job_name=Ref(job_name("select")),
            role_arn=select_role.role.role_arn,
            instance_type=pruning.helper_instance_type,
            hyperparameters={
                "tuning-job-name.$": "$.tuning.name",
                "output-s3-uri.$": run_uri(bucket.bucket_name),
                "search-space": pruning.search_space,
                "objectives": pruning.objectives,
                "sagemaker_program": "select_tuning_job.py",
                **script_mode,
            },
            channels=[S3Channel("model", supernet_uri)],
            max_runtime_seconds=3600,
            **common,
        )
        export = TrainingJobRequest(
            job_name=Ref(job_name("export")),
            role_arn=job_role.role.role_arn,
            instance_type=pruning.helper_instance_type,
            hyperparameters={
                "max-error-increase": str(pruning.max_error_increase),
                "minimise": pruning.minimise,
                "inference-code-dir": ENCODER_CODE_IN_JOB,
                "base-output-s3-uri.$": run_uri(bucket.bucket_name, "base/model.tar.gz"),
                "sagemaker_program": "export_models.py",
                **script_mode,
            },
            channels=[
                S3Channel("model", supernet_uri),
                S3Channel("pareto", Ref(run_uri(bucket.bucket_name, "pareto.json"))),
            ],
            max_runtime_seconds=3600,
            **common,
        )
        self.parameter_ranges = parameter_ranges(pruning)
        workflow = PruningWorkflow(
            self,
            "Workflow",
            bucket_name=bucket.bucket_name,
            run_prefix=prefix,
            supernet=supernet,
            trial=trial,
            select=select,
            export=export,
            parameter_ranges=self.parameter_ranges,
            objective_metric="validation_error",
            max_jobs=pruning.max_jobs,
            max_parallel_jobs=pruning.max_parallel_jobs,
            topic=self.topic,
            model_parameter=self.model_parameter,
            log_retention_days=pruning.log_retention_days,
            key=key,
            role_statements=self._state_machine_statements(
                roles=[job_role.role, select_role.role], key=key, prefix=prefix
            ),
        )
        self.state_machine = workflow.state_machine

        # Values of the `{name}` fields in stacks/nag.py's acknowledgments for this stack.
        self.nag_details = {"job_prefix": prefix, "endpoints": "" if endpoints else None}
        self.endpoints: dict[str, SageMakerEndpoint] = {}
        if endpoints:
            self._endpoints(config, endpoints, bucket=bucket, key=key, images=images)

        CfnOutput(self, "StateMachineArn", value=self.state_machine.state_machine_arn)
        CfnOutput(self, "TopicArn", value=self.topic.topic_arn)
        CfnOutput(self, "ModelParameterName", value=self.model_parameter.parameter_name)
        for name, endpoint in self.endpoints.items():
            CfnOutput(self, f"{name}EndpointName", value=endpoint.endpoint_name, description="make loadtest")

    def _arn(self, resource: str, prefix: str) -> str:
        return self.format_arn(service="sagemaker", resource=resource, resource_name=f"{prefix}-*")

    def _state_machine_statements(
        self, *, roles: list[iam.IRole], key: kms.IKey, prefix: str
    ) -> list[iam.PolicyStatement]:
        """Create/describe/stop only this environment's jobs; pass only the two job roles."""
        return [
            iam.PolicyStatement(
                sid="OwnTrainingJobs",
                actions=[
                    "sagemaker:CreateTrainingJob",
                    "sagemaker:DescribeTrainingJob",
                    "sagemaker:StopTrainingJob",
                    "sagemaker:AddTags",
                ],
                resources=[self._arn("training-job", prefix)],
            ),
            iam.PolicyStatement(
                sid="OwnTuningJobs",
                actions=[
                    "sagemaker:CreateHyperParameterTuningJob",
                    "sagemaker:DescribeHyperParameterTuningJob",
                    "sagemaker:StopHyperParameterTuningJob",
                    "sagemaker:ListTags",
                    "sagemaker:AddTags",
                ],
                resources=[self._arn("hyper-parameter-tuning-job", prefix)],
            ),
            iam.PolicyStatement(
                sid="PassJobRoles",
                actions=["iam:PassRole"],
                resources=[r.role_arn for r in roles],
                conditions={"StringEquals": {"iam:PassedToService": "sagemaker.amazonaws.com"}},
            ),
            iam.PolicyStatement(
                sid="SyncRules",  # the .sync integrations wait through Step Functions-managed EventBridge rules
                actions=["events:PutTargets", "events:PutRule", "events:DescribeRule"],
                resources=[
                    self.format_arn(service="events", resource="rule", resource_name=name)
                    for name in (
                        "StepFunctionsGetEventsForSageMakerTrainingJobsRule",
                        "StepFunctionsGetEventsForSageMakerTuningJobsRule",
                    )
                ],
            ),
            iam.PolicyStatement(
                sid="VolumeKeyGrant",
                actions=["kms:CreateGrant"],
                resources=[key.key_arn],
                conditions={"Bool": {"kms:GrantIsForAWSResource": "true"}},
            ),
            iam.PolicyStatement(sid="DescribeDataKey", actions=["kms:DescribeKey"], resources=[key.key_arn]),
        ]

    def _endpoints(
        self,
        config: AppConfig,
        endpoints: dict[str, EncoderEndpointConfig],
        *,
        bucket: s3.IBucket,
        key: kms.IKey,
        images: ContainerImages,
    ) -> None:
        role = iam.Role(
            self,
            "EndpointRole",
            assumed_by=iam.ServicePrincipal("sagemaker.amazonaws.com"),
            description=f"{config.app_name}-{config.env_name}: base and pruned encoder endpoints",
        )
        policy = iam.ManagedPolicy(
            self,
            "EndpointPolicy",
            roles=[role],
            description="Read the two pinned model.tar.gz, pull the HF inference image, write endpoint logs",
            statements=[
                iam.PolicyStatement(
                    sid="ReadPinnedModels",
                    actions=["s3:GetObject"],
                    resources=sorted({bucket.arn_for_objects(cfg.model_key) for cfg in endpoints.values()}),
                ),
                iam.PolicyStatement(sid="DecryptWithDataKey", actions=["kms:Decrypt"], resources=[key.key_arn]),
                iam.PolicyStatement(
                    sid="PullInferenceImage",
                    actions=["ecr:BatchCheckLayerAvailability", "ecr:BatchGetImage", "ecr:GetDownloadUrlForLayer"],
                    resources=sorted({images.repository_arn(cfg.image) for cfg in endpoints.values()}),
                ),
                *endpoint_runtime_statements(self),
            ],
        )
        allow_alarm_notifications(key)
        for name, cfg in endpoints.items():
            image_uri = images.uri(cfg.image)
            environment = {"SAGEMAKER_PROGRAM": "inference.py", "SAGEMAKER_CONTAINER_LOG_LEVEL": "20"}
            if cfg.model_server_workers:
                environment["SAGEMAKER_MODEL_SERVER_WORKERS"] = str(cfg.model_server_workers)
            revision = hashlib.sha256("\n".join((cfg.model_key, cfg.image, cfg.instance_type)).encode()).hexdigest()
            self.endpoints[name] = SageMakerEndpoint(
                self,
                name,
                image_uri=image_uri,
                model_data_url=bucket.s3_url_for_object(cfg.model_key),
                environment=environment,
                execution_role=role,
                role_policies=[policy],
                revision=revision[:12],
                instance_type=cfg.instance_type,
                initial_instance_count=cfg.initial_instance_count,
                instance_vcpus=cfg.vcpus,
                volume_size_gb=cfg.volume_size_gb,
                startup_health_check_timeout_seconds=cfg.container_startup_health_check_timeout_seconds,
                model_data_download_timeout_seconds=cfg.model_data_download_timeout_seconds,
                kms_key=key,
                rollout=cfg.rollout,
                autoscaling=cfg.autoscaling,
                alarms=cfg.alarms,
                alarm_topic=self.topic,
                data_capture=DataCaptureConfig(enabled=False),
                data_capture_destination=None,
            )
