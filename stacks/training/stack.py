"""QLoRA training: CloudFormation has no training-job resource, so this stack provisions the trigger.

A state machine runs `training_code/qlora` as a SageMaker job, started by a dataset's completion marker
`datasets/<name>/_READY` (EventBridge) or by tools/start_training.py, and records the merged model's S3
prefix in SSM.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from aws_cdk import Aws, CfnOutput, Stack
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_s3_assets as s3_assets
from aws_cdk import aws_sns as sns
from aws_cdk import aws_ssm as ssm
from constructs import Construct

from ..code_contract.qlora import ENTRY_POINT
from ..config import AppConfig, ConfigError
from ..config.training import PREFIX_LIMIT, TORCH_DISTRIBUTED, TrainingConfig
from ..paths import QLORA_CODE
from ..shared.acknowledgments import Wildcard
from ..shared.assets import build_content_addressed
from ..shared.bucket_layout import BASE_MODELS_PREFIX, CHECKPOINTS_PREFIX, DATASETS_PREFIX, MODELS_PREFIX
from ..shared.container_images import ContainerImages
from ..shared.job_role import SageMakerJobRole
from ..shared.placement import Placement
from .base_access import hub_token_statements
from .compile_job import compile_request
from .job import job_placement, runs_offline, training_job_request
from .registry import FACTS_FILE, LINEAGE_FILE, PENDING, REJECTED, RegistrationSettings, ServingSpec
from .state_paths import RUN
from .trigger import dataset_upload_rule
from .workflow import MAX_JOB_NAME, NeuronCompile, TrainingWorkflow, max_job_name_length

TRAINING_IMAGE = "hf_pytorch_training_gpu"
# What script mode finds offline: `pip install -r` of a file without requirements installs nothing, needs no index.
BAKED_REQUIREMENTS = b"# Baked into the training image (training.image_repository or image_uri; README, Training).\n"


# Why the registry's statements (by Sid) reach their first resource, a wildcard (cdk-nag's IAM5).
REGISTRY_WILDCARDS = {
    "RegisterModelPackages": "SageMaker numbers the versions of a package group itself; only versions in this "
    "environment's group, and only as PendingManualApproval or Rejected (condition sagemaker:ModelApprovalStatus).",
    "ReadModelFacts": "The facts train.py writes into each model folder, models/<job>/output/model/model_facts.json; "
    "job names are generated per execution, and the state machine can read no other object.",
    "ReadCompiledFacts": "The compiled model's own config.json (its shape and compiler), models/<job>/<shape folder>/"
    "<compile job>/output/model/; job names are generated per execution, and only that file of the folder is read.",
    "WriteLineage": "One lineage manifest per training job, models/<job>/lineage.json; job names are generated per "
    "execution, and the state machine can write no other object.",
}


def compile_image(config: AppConfig) -> str:
    """The image the compile job runs, as the backend's compile step names it (stacks/serving/backends/<name>)."""
    return config.serving.spec.compile.image(config.serving)


def training_code_tarball(*, offline: bool) -> Path:
    """The code asset. Offline (no internet), requirements.txt ships as a comment only: the image holds the
    packages (config requires one) and script mode would otherwise try, and fail, to pip-install them."""
    extra = {"requirements.txt": BAKED_REQUIREMENTS} if offline else None
    return build_content_addressed(QLORA_CODE, extra_files=extra)


def script_mode_keys(training: TrainingConfig, *, submit_directory: str) -> dict[str, str]:
    """What the training toolkit reads (never train.py); more than one GPU: torchrun on every host, with the
    instance type as the SageMaker SDK's torch_distributed sets it (the launcher's EFA settings key on it)."""
    keys = {
        "sagemaker_program": ENTRY_POINT,
        "sagemaker_submit_directory": submit_directory,
        "sagemaker_region": Aws.REGION,
    }
    if training.distributed:
        keys.update({TORCH_DISTRIBUTED: "true", "sagemaker_instance_type": training.instance_type})
    return keys


def job_name_prefix(config: AppConfig) -> str:
    """Short, lower-case and fixed per environment: the IAM scope `training-job/<prefix>-*` relies on it."""
    training = config.training
    prefix = training.job_name_prefix or f"{config.app_name}-{config.env_name}"
    if max_job_name_length(prefix) > MAX_JOB_NAME:
        problem = f"got {prefix!r} (<app_name>-<env>); {PREFIX_LIMIT}"
        raise ConfigError(config.source, "training.job_name_prefix", problem)
    return prefix


def _compiled_folder_with_facts(config: AppConfig) -> str | None:
    """Where the compile step writes a model whose config.json records its compiled shape (LMI's partition)."""
    step = config.serving.spec.compile if config.compiles_for_neuron else None
    if step is None or step.recorded_shape(config.serving) is None:
        return None
    return step.folder(config.serving)


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
        model_package_group_name: str,
        placement: Placement | None = None,
        **kwargs,
    ) -> None:
        """`placement`: isolated mode (network.isolated): the job runs in these subnets, network-isolated;
        `model_package_group_name`: the DataStack's registry group every run is registered in (its export's
        import: the name is generated per Data stack)."""
        super().__init__(scope, construct_id, **kwargs)
        self._config = config
        training = config.training
        self.job_name_prefix = prefix = job_name_prefix(config)
        compiles = config.compiles_for_neuron
        serving_image = [config.serving.image_name] if config.serving is not None else []
        images = ContainerImages(
            self, "Images", names=[TRAINING_IMAGE, *([compile_image(config)] if compiles else []), *serving_image]
        )
        images.require_region(config)
        offline = runs_offline(config, placement)
        code = s3_assets.Asset(self, "TrainingCode", path=str(training_code_tarball(offline=offline)))
        image_uri, image_repository_arn = self._training_image(training, images)
        role = self._job_role(
            config, bucket=bucket, key=key, code=code, image_repository_arn=image_repository_arn, placement=placement
        )
        self.topic = sns.Topic(self, "FailureTopic", master_key=key, enforce_ssl=True)
        self.model_parameter = self._model_parameter(config)
        self.compile_request = self.compiled_model_parameter = None
        compile_step = None
        if compiles:
            compile_role = self._compile_role(config, bucket=bucket, key=key, images=images, placement=placement)
            self.compiled_model_parameter = self._model_parameter(config, compiled=True)
            self.compile_request = compile_request(
                config,
                bucket=bucket,
                key=key,
                role=compile_role.role,
                placement=placement,
                image_uri=images.uri(compile_image(config), config.serving.image_uri),
            )
            compile_step = NeuronCompile(request=self.compile_request, model_parameter=self.compiled_model_parameter)
        self.request, submit_directory = training_job_request(
            config,
            bucket=bucket,
            key=key,
            code=code,
            role=role.role,
            image_uri=image_uri,
            placement=placement,
        )
        registry = self._registry_statements(bucket=bucket, group_name=model_package_group_name)
        workflow = TrainingWorkflow(
            self,
            "Workflow",
            request=self.request,
            job_name_prefix=prefix,
            bucket_name=bucket.bucket_name,
            default_hyperparameters=training.hyperparameters,
            fixed_hyperparameters=script_mode_keys(training, submit_directory=submit_directory),
            topic=self.topic,
            model_parameter=self.model_parameter,
            capacity_retries=training.capacity_retries,
            capacity_backoff_seconds=training.capacity_backoff_seconds,
            log_retention_days=training.log_retention_days,
            key=key,
            registration=self._registration(
                config, bucket=bucket, images=images, code=code, group_name=model_package_group_name
            ),
            role_statements=[*self._record_statements(), *registry],
            role_wildcards=[
                Wildcard(s.resources[0], REGISTRY_WILDCARDS[s.sid]) for s in registry if s.sid in REGISTRY_WILDCARDS
            ],
            compile_step=compile_step,
            distributed=training.distributed,
        )
        self.state_machine = workflow.state_machine
        self.rule = dataset_upload_rule(self, bucket=bucket, state_machine=self.state_machine)
        self._outputs(config, role=role.role)

    def _job_role(
        self,
        config: AppConfig,
        *,
        bucket: s3.IBucket,
        key: kms.IKey,
        code: s3_assets.Asset,
        image_repository_arn: str,
        placement: Placement | None,
    ) -> SageMakerJobRole:
        return SageMakerJobRole(
            self,
            "TrainingRole",
            bucket=bucket,
            key=key,
            code=code,
            job_name_prefix=self.job_name_prefix,
            read_prefixes=(DATASETS_PREFIX, BASE_MODELS_PREFIX, CHECKPOINTS_PREFIX),
            write_prefixes=(MODELS_PREFIX, CHECKPOINTS_PREFIX),
            prefix_reasons={
                DATASETS_PREFIX: "The training job reads the dataset it is given, any object under datasets/ (the "
                "channel is chosen per execution); nothing else in the bucket.",
                BASE_MODELS_PREFIX: "Network-isolated jobs read the base model from a `model` channel under "
                "base-models/; read only.",
                CHECKPOINTS_PREFIX: "Checkpoints are written and read back on resume under checkpoints/<run>/; the "
                "run name is generated per execution.",
                MODELS_PREFIX: "The merged model is written under models/<job-name>/; job names are generated per "
                "execution, so the prefix is the narrowest fixed scope.",
            },
            image_repository_arn=image_repository_arn,
            vpc=job_placement(config, placement),
            description="SageMaker execution role of the QLoRA training jobs",
            policy_description="QLoRA training job: code, datasets/, base-models/, models/, checkpoints/, data key",
            code_channel=placement is not None,
            extra_statements=hub_token_statements(config.training),
        )

    def _training_image(self, training: TrainingConfig, images: ContainerImages) -> tuple[str, str]:
        """(image URI, repository ARN): `image_repository` lives in the deploying account's ECR, so the URI is
        built from the stack's account and region (prod stays account-agnostic); else image_uri or the table."""
        if training.image_repository is None:
            return (
                images.uri(TRAINING_IMAGE, training.image_uri),
                images.repository_arn(TRAINING_IMAGE, training.image_uri),
            )
        name = re.split(r"[:@]", training.image_repository, maxsplit=1)[0]
        uri = f"{Aws.ACCOUNT_ID}.dkr.ecr.{Aws.REGION}.{Aws.URL_SUFFIX}/{training.image_repository}"
        return uri, self.format_arn(service="ecr", resource="repository", resource_name=name)

    def _model_parameter(self, config: AppConfig, *, compiled: bool = False) -> ssm.StringParameter:
        """A well-known name per environment (the lookup handle for people and the serving side). Name is the
        parameter's only replacement trigger, so the fixed name can never collide with its own replacement."""
        kind = "compiled-model" if compiled else "model"
        what = f"Neuron-compiled model ({config.serving.backend})" if compiled else "merged QLoRA model"
        return ssm.StringParameter(
            self,
            "CompiledModelParameter" if compiled else "ModelParameter",
            parameter_name=f"/{config.app_name}/{config.env_name}/training/{kind}-s3-uri",
            string_value="none",  # RecordModel / RecordCompiledModel overwrite it with the model's S3 prefix
            description=f"{config.app_name}-{config.env_name}: S3 prefix of the latest {what}",
        )

    def _compile_role(
        self,
        config: AppConfig,
        *,
        bucket: s3.IBucket,
        key: kms.IKey,
        images: ContainerImages,
        placement: Placement | None,
    ) -> SageMakerJobRole:
        """The compile job reads merged models and writes the compiled one beside them (models/); no code."""
        compile_program = config.serving.spec.compile.program
        return SageMakerJobRole(
            self,
            "CompileRole",
            bucket=bucket,
            key=key,
            code=None,
            job_name_prefix=self.job_name_prefix,
            read_prefixes=(MODELS_PREFIX,),
            write_prefixes=(MODELS_PREFIX,),
            prefix_reasons={
                MODELS_PREFIX: "The compile job reads the merged model under models/<training job>/ and writes the "
                "compiled one beside it; job names are generated per execution."
            },
            image_repository_arn=images.repository_arn(compile_image(config), config.serving.image_uri),
            vpc=job_placement(config, placement),
            description=f"SageMaker execution role of the Neuron compile jobs ({compile_program})",
            policy_description="Neuron compile job: models/ (merged in, compiled out), data key",
        )

    def _record_statements(self) -> list[iam.PolicyStatement]:
        """RecordModel's is the shell's; the compiled model's parameter is this stack's."""
        if self.compiled_model_parameter is None:
            return []
        return [
            iam.PolicyStatement(
                sid="RecordCompiledModel",
                actions=["ssm:PutParameter"],
                resources=[self.compiled_model_parameter.parameter_arn],
            )
        ]

    def _registration(
        self, config: AppConfig, *, bucket: s3.IBucket, images: ContainerImages, code: s3_assets.Asset, group_name: str
    ) -> RegistrationSettings:
        """ModelRegistration's settings: the gate, the serving backend's image and ml.inf2 type, the lineage's
        synth-time values (where the base model comes from, code asset hash)."""
        serving = config.serving
        spec = compiled = None
        if serving is not None:
            spec = ServingSpec(
                backend=serving.backend,
                image_uri=images.uri(serving.image_name, serving.image_uri),
                instance_types=(serving.instance_type,),
                environment=dict(serving.spec.model_environment),
            )
            if config.compiles_for_neuron:
                compiled = ServingSpec(
                    backend=serving.backend,
                    image_uri=images.uri(compile_image(config), serving.image_uri),
                    instance_types=(serving.instance_type,),
                    environment=dict(serving.spec.model_environment),
                )
        base_key = config.training.base_model_key
        return RegistrationSettings(
            group_name=group_name,
            bucket_name=bucket.bucket_name,
            min_improvement=config.training.quality_gate.min_improvement,
            serving=spec,
            compiled_serving=compiled,
            base_model=f"s3://{bucket.bucket_name}/{base_key}" if base_key else f"{RUN.hyperparameters}.model_id",
            compiled_folder=_compiled_folder_with_facts(config),
            code_asset_hash=code.asset_hash,
        )

    def _compiled_facts_statements(self, bucket: s3.IBucket) -> list[iam.PolicyStatement]:
        """ReadCompiledFacts (LMI): only the compiled model's config.json, in its shape's folder."""
        folder = _compiled_folder_with_facts(self._config)
        if folder is None:
            return []
        objects = bucket.arn_for_objects(f"{MODELS_PREFIX}*/{folder}*/output/model/config.json")
        return [iam.PolicyStatement(sid="ReadCompiledFacts", actions=["s3:GetObject"], resources=[objects])]

    def _registry_statements(self, *, bucket: s3.IBucket, group_name: str) -> list[iam.PolicyStatement]:
        """Register versions in this environment's group only, never as Approved (a person approves);
        read only the model facts train.py writes into each model folder; list the dataset's versions under
        datasets/; write only the lineage manifests beside the models. DescribeRun's DescribeTrainingJob is in
        OwnTrainingJobs; the data key's Decrypt (reading the facts) and GenerateDataKey (writing the manifest)
        in the shell's EncryptNotification."""
        return [
            iam.PolicyStatement(
                sid="RegisterModelPackages",
                actions=["sagemaker:CreateModelPackage"],
                resources=[
                    self.format_arn(service="sagemaker", resource="model-package", resource_name=f"{group_name}/*"),
                    self.format_arn(service="sagemaker", resource="model-package-group", resource_name=group_name),
                ],
                conditions={"StringEquals": {"sagemaker:ModelApprovalStatus": [PENDING, REJECTED]}},
            ),
            iam.PolicyStatement(
                sid="ReadModelFacts",
                actions=["s3:GetObject"],
                resources=[bucket.arn_for_objects(f"{MODELS_PREFIX}*/output/model/{FACTS_FILE}")],
            ),
            *self._compiled_facts_statements(bucket),
            iam.PolicyStatement(
                sid="ListDatasetVersions",
                actions=["s3:ListBucketVersions"],
                resources=[bucket.bucket_arn],
                conditions={"StringLike": {"s3:prefix": [f"{DATASETS_PREFIX}*"]}},
            ),
            iam.PolicyStatement(
                sid="WriteLineage",
                actions=["s3:PutObject"],
                resources=[bucket.arn_for_objects(f"{MODELS_PREFIX}*/{LINEAGE_FILE}")],
            ),
        ]

    def _outputs(self, config: AppConfig, *, role: iam.IRole) -> None:
        CfnOutput(self, "StateMachineArn", value=self.state_machine.state_machine_arn)
        CfnOutput(self, "FailureTopicArn", value=self.topic.topic_arn)
        CfnOutput(self, "ModelParameterName", value=self.model_parameter.parameter_name)
        CfnOutput(self, "TrainingRoleArn", value=role.role_arn)
        if self.compiled_model_parameter is not None:
            CfnOutput(self, "CompiledModelParameterName", value=self.compiled_model_parameter.parameter_name)
        hyperparameters = json.dumps(dict(config.training.hyperparameters), sort_keys=True)
        CfnOutput(self, "DefaultHyperparameters", value=hyperparameters)
