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
from ..shared.assets import build_content_addressed
from ..shared.container_images import ContainerImages
from ..shared.job_access import JobImage
from ..shared.job_role import SageMakerJobRole
from ..shared.placement import Placement
from .benchmark_job import benchmark_plan
from .compile_job import compile_request
from .job import runs_offline, training_job_request
from .registry import RegistrationSettings, ServingSpec
from .state_paths import RUN
from .trigger import dataset_upload_rule
from .workflow import MAX_JOB_NAME, NeuronCompile, TrainingWorkflow, max_job_name_length

TRAINING_IMAGE = "hf_pytorch_training_gpu"
# What script mode finds offline: `pip install -r` of a file without requirements installs nothing, needs no index.
BAKED_REQUIREMENTS = b"# Baked into the training image (training.image_repository or image_uri; README, Training).\n"


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
        role = SageMakerJobRole(
            self,
            "TrainingRole",
            job_name_prefix=prefix,
            description="SageMaker execution role of the QLoRA training jobs",
            policy_description="QLoRA training job: code, datasets/, base-models/, models/, checkpoints/, data key",
        )
        self.topic = sns.Topic(self, "FailureTopic", master_key=key, enforce_ssl=True)
        self.model_parameter = self._model_parameter(config)
        self.compile_request = self.compiled_model_parameter = None
        compile_step = None
        if compiles:
            compile_role = SageMakerJobRole(
                self,
                "CompileRole",
                job_name_prefix=prefix,
                description="SageMaker execution role of the Neuron compile jobs "
                f"({config.serving.spec.compile.program})",
                policy_description="Neuron compile job: models/ (merged in, compiled out), data key",
            )
            self.compiled_model_parameter = self._model_parameter(config, compiled=True)
            name, override = compile_image(config), config.serving.image_uri
            self.compile_request = compile_request(
                config,
                bucket=bucket,
                key=key,
                role_arn=compile_role.role_arn,
                placement=placement,
                image=JobImage(images.uri(name, override), images.repository_arn(name, override)),
            )
            compile_step = NeuronCompile(request=self.compile_request, model_parameter=self.compiled_model_parameter)
        self.request, submit_directory = training_job_request(
            config,
            bucket=bucket,
            key=key,
            code=code,
            role_arn=role.role_arn,
            image=self._training_image(training, images),
            placement=placement,
        )
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
            compile_step=compile_step,
            distributed=training.distributed,
            benchmark=benchmark_plan(training, bucket=bucket, job=self.request, submit_directory=submit_directory),
        )
        self.state_machine = workflow.state_machine
        self.rule = dataset_upload_rule(self, bucket=bucket, state_machine=self.state_machine)
        self._outputs(config, role=role.role)

    def _training_image(self, training: TrainingConfig, images: ContainerImages) -> JobImage:
        """The image and its repository: `image_repository` lives in the deploying account's ECR, so the URI is
        built from the stack's account and region (prod stays account-agnostic); else image_uri or the table."""
        if training.image_repository is None:
            return JobImage(
                images.uri(TRAINING_IMAGE, training.image_uri),
                images.repository_arn(TRAINING_IMAGE, training.image_uri),
            )
        name = re.split(r"[:@]", training.image_repository, maxsplit=1)[0]
        uri = f"{Aws.ACCOUNT_ID}.dkr.ecr.{Aws.REGION}.{Aws.URL_SUFFIX}/{training.image_repository}"
        return JobImage(uri, self.format_arn(service="ecr", resource="repository", resource_name=name))

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
            bucket_arn=bucket.bucket_arn,
            min_improvement=config.training.quality_gate.min_improvement,
            serving=spec,
            compiled_serving=compiled,
            base_model=f"s3://{bucket.bucket_name}/{base_key}" if base_key else f"{RUN.hyperparameters}.model_id",
            compiled_folder=_compiled_folder_with_facts(config),
            code_asset_hash=code.asset_hash,
            max_benchmark_drop=config.training.quality_gate.max_benchmark_drop,
        )

    def _outputs(self, config: AppConfig, *, role: iam.IRole) -> None:
        CfnOutput(self, "StateMachineArn", value=self.state_machine.state_machine_arn)
        CfnOutput(self, "FailureTopicArn", value=self.topic.topic_arn)
        CfnOutput(self, "ModelParameterName", value=self.model_parameter.parameter_name)
        CfnOutput(self, "TrainingRoleArn", value=role.role_arn)
        if self.compiled_model_parameter is not None:
            CfnOutput(self, "CompiledModelParameterName", value=self.compiled_model_parameter.parameter_name)
        hyperparameters = json.dumps(dict(config.training.hyperparameters), sort_keys=True)
        CfnOutput(self, "DefaultHyperparameters", value=hyperparameters)
