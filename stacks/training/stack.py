"""QLoRA training: CloudFormation has no training-job resource, so this stack provisions the trigger.

A state machine runs `training_code/qlora` as a SageMaker job, started by uploads under `datasets/`
(EventBridge) or by tools/start_training.py, and records the merged model's S3 prefix in SSM.
"""

from __future__ import annotations

import json

from aws_cdk import Aws, CfnOutput, Stack
from aws_cdk import aws_events as events
from aws_cdk import aws_events_targets as targets
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_s3_assets as s3_assets
from aws_cdk import aws_sns as sns
from aws_cdk import aws_ssm as ssm
from constructs import Construct

from ..code_contract.qlora import ENTRY_POINT, metric_definitions
from ..config import AppConfig, ConfigError
from ..config.training import PREFIX_LIMIT
from ..paths import QLORA_CODE
from ..shared.assets import build_content_addressed
from ..shared.bucket_layout import BASE_MODELS_PREFIX, CHECKPOINTS_PREFIX, DATASETS_PREFIX, MODELS_PREFIX
from ..shared.container_images import ContainerImages
from ..shared.job_request import Ref, S3Channel, TrainingJobRequest
from ..shared.job_role import TrainingRole
from ..shared.placement import Placement
from .workflow import MAX_JOB_NAME, TrainingWorkflow, job_name_expression, max_job_name_length

TRAINING_IMAGE = "hf_pytorch_training_gpu"
CODE_CHANNEL_DIR = "/opt/ml/input/data/code/"  # an isolated container cannot fetch its code itself


def job_name_prefix(config: AppConfig) -> str:
    """Short, lower-case and fixed per environment: the IAM scope `training-job/<prefix>-*` relies on it."""
    training = config.training
    prefix = training.job_name_prefix or f"{config.app_name}-{config.env_name}"
    if max_job_name_length(prefix) > MAX_JOB_NAME:
        problem = f"got {prefix!r} (<app_name>-<env>); {PREFIX_LIMIT}"
        raise ConfigError(config.source, "training.job_name_prefix", problem)
    return prefix


class TrainingStack(Stack):
    """State machine + EventBridge trigger + SNS failure topic + SSM model pointer for one environment."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        config: AppConfig,
        bucket: s3.IBucket,
        key: kms.IKey,
        placement: Placement | None = None,
        **kwargs,
    ) -> None:
        """`placement`: isolated mode (network.isolated): the job runs in these subnets, network-isolated."""
        super().__init__(scope, construct_id, **kwargs)
        training = config.training
        isolated = placement is not None
        subnet_ids = placement.subnet_ids if placement else training.subnet_ids
        security_group_ids = placement.security_group_ids if placement else training.security_group_ids
        prefix = job_name_prefix(config)

        images = ContainerImages(self, "Images", names=[TRAINING_IMAGE])
        images.require_region(config)
        code = s3_assets.Asset(self, "TrainingCode", path=str(build_content_addressed(QLORA_CODE)))

        role = TrainingRole(
            self,
            "TrainingRole",
            bucket=bucket,
            key=key,
            code=code,
            job_name_prefix=prefix,
            read_prefixes=(DATASETS_PREFIX, BASE_MODELS_PREFIX, CHECKPOINTS_PREFIX),
            write_prefixes=(MODELS_PREFIX, CHECKPOINTS_PREFIX),
            image_repository_arn=images.repository_arn(TRAINING_IMAGE, training.image_uri),
            vpc=bool(subnet_ids),
            code_channel=isolated,
        )

        self.topic = sns.Topic(self, "FailureTopic", master_key=key, enforce_ssl=True)
        # A well-known name per environment (the lookup handle for people and the serving side). Name is the
        # parameter's only replacement trigger, so the fixed name can never collide with its own replacement.
        self.model_parameter = ssm.StringParameter(
            self,
            "ModelParameter",
            parameter_name=f"/{config.app_name}/{config.env_name}/training/model-s3-uri",
            string_value="none",  # RecordModel overwrites it with s3://<bucket>/models/<job>/output/model/
            description=f"{config.app_name}-{config.env_name}: S3 prefix of the latest merged QLoRA model",
        )

        channels = [S3Channel("training", Ref("$.train_data"))]
        if training.base_model_key:
            channels.append(S3Channel("model", f"s3://{bucket.bucket_name}/{training.base_model_key}"))
        submit_directory = code.s3_object_url
        if isolated:  # the toolkit extracts a local sourcedir tarball as it would download an S3 one
            channels.append(S3Channel("code", code.s3_object_url))
            submit_directory = CODE_CHANNEL_DIR + code.s3_object_key
        request = TrainingJobRequest(
            job_name=job_name_expression(),
            role_arn=role.role.role_arn,
            image_uri=images.uri(TRAINING_IMAGE, training.image_uri),
            instance_type=training.instance_type,
            instance_count=training.instance_count,
            volume_size_gb=training.volume_size_gb,
            kms_key_arn=key.key_arn,
            output_s3_uri=f"s3://{bucket.bucket_name}/{MODELS_PREFIX}",
            hyperparameters=Ref("$.run.hyperparameters"),
            channels=channels,
            max_runtime_seconds=training.max_runtime_hours * 3600,
            max_wait_seconds=training.max_wait_seconds,
            checkpoint_s3_uri=Ref(f"States.Format('s3://{bucket.bucket_name}/{CHECKPOINTS_PREFIX}{{}}/', $.run.name)"),
            metric_definitions=metric_definitions(),
            network_isolation=training.network_isolation or isolated,
            subnet_ids=subnet_ids,
            security_group_ids=security_group_ids,
            tags=dict(config.all_tags),
        )
        self.request = request
        workflow = TrainingWorkflow(
            self,
            "Workflow",
            request=request,
            job_name_prefix=prefix,
            bucket_name=bucket.bucket_name,
            default_hyperparameters=training.hyperparameters,
            fixed_hyperparameters={
                "sagemaker_program": ENTRY_POINT,
                "sagemaker_submit_directory": submit_directory,
                "sagemaker_region": Aws.REGION,
            },
            topic=self.topic,
            model_parameter=self.model_parameter,
            capacity_retries=training.capacity_retries,
            capacity_backoff_seconds=training.capacity_backoff_seconds,
            log_retention_days=training.log_retention_days,
            key=key,
            role_statements=self._state_machine_statements(role=role.role, key=key, prefix=prefix),
        )
        self.state_machine = workflow.state_machine

        # Uploads under datasets/ start a run with the uploaded object as training data (same input shape
        # as tools/start_training.py: see stacks/training_input.py).
        self.rule = events.Rule(
            self,
            "DatasetUploaded",
            description="Start QLoRA training when a dataset lands under datasets/ in the artifact bucket",
            event_pattern=events.EventPattern(
                source=["aws.s3"],
                detail_type=["Object Created"],
                detail={"bucket": {"name": [bucket.bucket_name]}, "object": {"key": [{"prefix": DATASETS_PREFIX}]}},
            ),
        )
        events_role = iam.Role(
            self,
            "RuleRole",
            assumed_by=iam.ServicePrincipal("events.amazonaws.com"),
            description="EventBridge: start the training state machine on dataset uploads",
        )
        iam.ManagedPolicy(
            self,
            "RulePolicy",
            roles=[events_role],
            statements=[iam.PolicyStatement(
                actions=["states:StartExecution"], resources=[self.state_machine.state_machine_arn]
            )],
        )
        self.rule.add_target(
            targets.SfnStateMachine(
                self.state_machine,
                role=events_role.without_policy_updates(),
                input=events.RuleTargetInput.from_object({
                    "train_data": "s3://"
                    + events.EventField.from_path("$.detail.bucket.name")
                    + "/"
                    + events.EventField.from_path("$.detail.object.key"),
                    "hyperparameters": {},
                }),
            )
        )

        CfnOutput(self, "StateMachineArn", value=self.state_machine.state_machine_arn)
        CfnOutput(self, "FailureTopicArn", value=self.topic.topic_arn)
        CfnOutput(self, "ModelParameterName", value=self.model_parameter.parameter_name)
        CfnOutput(self, "TrainingRoleArn", value=role.role.role_arn)
        CfnOutput(self, "DefaultHyperparameters", value=json.dumps(dict(training.hyperparameters), sort_keys=True))

    def _state_machine_statements(self, *, role: iam.IRole, key: kms.IKey, prefix: str) -> list[iam.PolicyStatement]:
        """Create/describe/stop only this environment's jobs; pass only the training role."""
        jobs = self.format_arn(service="sagemaker", resource="training-job", resource_name=f"{prefix}-*")
        return [
            iam.PolicyStatement(
                sid="OwnTrainingJobs",
                actions=[
                    "sagemaker:CreateTrainingJob",
                    "sagemaker:DescribeTrainingJob",
                    "sagemaker:StopTrainingJob",
                    "sagemaker:AddTags",
                ],
                resources=[jobs],
            ),
            iam.PolicyStatement(
                sid="PassTrainingRole",
                actions=["iam:PassRole"],
                resources=[role.role_arn],
                conditions={"StringEquals": {"iam:PassedToService": "sagemaker.amazonaws.com"}},
            ),
            iam.PolicyStatement(
                sid="SyncRule",  # the .sync integration waits through a Step Functions-managed EventBridge rule
                actions=["events:PutTargets", "events:PutRule", "events:DescribeRule"],
                resources=[self.format_arn(
                    service="events", resource="rule",
                    resource_name="StepFunctionsGetEventsForSageMakerTrainingJobsRule",
                )],
            ),
            iam.PolicyStatement(
                sid="VolumeKeyGrant",  # CreateTrainingJob with VolumeKmsKeyId/KmsKeyId checks the caller's key use
                actions=["kms:CreateGrant"],
                resources=[key.key_arn],
                conditions={"Bool": {"kms:GrantIsForAWSResource": "true"}},
            ),
            iam.PolicyStatement(sid="DescribeDataKey", actions=["kms:DescribeKey"], resources=[key.key_arn]),
        ]
