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
from aws_cdk import aws_stepfunctions as sfn
from constructs import Construct

from ..code_contract.qlora import ENTRY_POINT
from ..config import ConfigError
from ..config.model_catalog import BaseModel
from ..config.training import PREFIX_LIMIT, TORCH_DISTRIBUTED, TrainingConfig
from ..paths import QLORA_CODE
from ..shared.assets import build_content_addressed
from ..shared.container_images import ContainerImages
from ..shared.environment import EnvironmentFacts
from ..shared.job_access import JobImage
from ..shared.job_role import SageMakerJobRole
from .benchmark_job import benchmark_plan
from .compile_job import compile_request
from .job import training_job_request
from .props import CompileFacts, JobNetwork, ServedBackend
from .registry import RegistrationSettings, ServingSpec
from .state_paths import RUN
from .trigger import dataset_upload_rule
from .workflow import MAX_JOB_NAME, NeuronCompile, TrainingWorkflow, max_job_name_length

TRAINING_IMAGE = "hf_pytorch_training_gpu"
# What script mode finds offline: `pip install -r` of a file without requirements installs nothing, needs no index.
BAKED_REQUIREMENTS = b"# Baked into the training image (training.image_repository or image_uri; README, Training).\n"


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


def job_name_prefix(training: TrainingConfig, environment: EnvironmentFacts) -> str:
    """Short, lower-case and fixed per environment: the IAM scope `training-job/<prefix>-*` relies on it."""
    prefix = training.job_name_prefix or environment.name
    if max_job_name_length(prefix) > MAX_JOB_NAME:
        problem = f"got {prefix!r} (<app_name>-<env>); {PREFIX_LIMIT}"
        raise ConfigError(environment.source, "training.job_name_prefix", problem)
    return prefix


class TrainingStack(Stack):
    """State machine + EventBridge trigger + SNS failure topic + SSM model pointer for one environment.

    Props beside the training section: `job_name_prefix` starts every job's name and the roles' IAM scope;
    `served`: the backend a version is registered for (None: no serving section); `compile_step`: the Neuron
    compile after training (None: not compiled ahead of time); `base_model`: the training base's record the job
    checks; `model_package_group_name`: the DataStack's registry group every run is registered in (its export's
    import: the name is generated per Data stack)."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        training: TrainingConfig,
        environment: EnvironmentFacts,
        job_name_prefix: str,
        network: JobNetwork,
        served: ServedBackend | None,
        compile_step: CompileFacts | None,
        base_model: BaseModel | None,
        bucket: s3.IBucket,
        key: kms.IKey,
        model_package_group_name: str,
        **kwargs,
    ) -> None:
        super().__init__(scope, construct_id, **kwargs)
        self.job_name_prefix = prefix = job_name_prefix
        images = self._images(environment, compile_step, served)
        code = s3_assets.Asset(self, "TrainingCode", path=str(training_code_tarball(offline=network.offline)))
        role = SageMakerJobRole(
            self,
            "TrainingRole",
            job_name_prefix=prefix,
            description="SageMaker execution role of the QLoRA training jobs",
            policy_description="QLoRA training job: code, datasets/, base-models/, models/, checkpoints/, data key",
        )
        self.topic = sns.Topic(self, "FailureTopic", master_key=key, enforce_ssl=True)
        self.model_parameter = self._model_parameter(environment)
        neuron_compile = self._neuron_compile(
            training, compile_step, environment, served=served, network=network, bucket=bucket, key=key, images=images
        )
        self.request, submit_directory = training_job_request(
            training,
            base_model=base_model,
            tags=environment.tags,
            network=network,
            bucket=bucket,
            key=key,
            code=code,
            role_arn=role.role_arn,
            image=self._training_image(training, images),
        )
        registration = self._registration(
            training, served, compile_step, bucket=bucket, images=images, code=code, group_name=model_package_group_name
        )
        self.state_machine = self._workflow(
            training, submit_directory, registration, neuron_compile, bucket=bucket, key=key
        )
        self.rule = dataset_upload_rule(self, bucket=bucket, state_machine=self.state_machine)
        self._outputs(training, role=role.role)

    def _images(
        self, environment: EnvironmentFacts, compile_step: CompileFacts | None, served: ServedBackend | None
    ) -> ContainerImages:
        """The training image, the compile step's and the served one (its registered packages name it), in a
        region that has them all."""
        names = [TRAINING_IMAGE, *([compile_step.image] if compile_step else []), *([served.image] if served else [])]
        images = ContainerImages(self, "Images", names=names)
        images.require_region(environment)
        return images

    def _workflow(
        self,
        training: TrainingConfig,
        submit_directory: str,
        registration: RegistrationSettings,
        neuron_compile: NeuronCompile | None,
        *,
        bucket: s3.IBucket,
        key: kms.IKey,
    ) -> sfn.StateMachine:
        """The run's state machine around `self.request`: defaults, capacity retries, the registry, the compile."""
        workflow = TrainingWorkflow(
            self,
            "Workflow",
            request=self.request,
            job_name_prefix=self.job_name_prefix,
            bucket_name=bucket.bucket_name,
            default_hyperparameters=training.hyperparameters,
            fixed_hyperparameters=script_mode_keys(training, submit_directory=submit_directory),
            topic=self.topic,
            model_parameter=self.model_parameter,
            capacity_retries=training.capacity_retries,
            capacity_backoff_seconds=training.capacity_backoff_seconds,
            log_retention_days=training.log_retention_days,
            key=key,
            registration=registration,
            compile_step=neuron_compile,
            distributed=training.distributed,
            benchmark=benchmark_plan(training, bucket=bucket, job=self.request, submit_directory=submit_directory),
        )
        return workflow.state_machine

    def _neuron_compile(
        self,
        training: TrainingConfig,
        compile_step: CompileFacts | None,
        environment: EnvironmentFacts,
        *,
        served: ServedBackend | None,
        network: JobNetwork,
        bucket: s3.IBucket,
        key: kms.IKey,
        images: ContainerImages,
    ) -> NeuronCompile | None:
        """The compile job's own role (it reads the merged model, writes the compiled one, nothing else), its
        request, and the SSM parameter the compiled model's prefix is recorded in; None without a compile step
        (`served` is set wherever one is: a compile step compiles for the served backend)."""
        self.compile_request = self.compiled_model_parameter = None
        if compile_step is None or served is None:
            return None
        compile_role = SageMakerJobRole(
            self,
            "CompileRole",
            job_name_prefix=self.job_name_prefix,
            description=f"SageMaker execution role of the Neuron compile jobs ({compile_step.program})",
            policy_description="Neuron compile job: models/ (merged in, compiled out), data key",
        )
        self.compiled_model_parameter = self._model_parameter(environment, compiled_backend=served.backend)
        name, override = compile_step.image, served.image_uri
        self.compile_request = compile_request(
            compile_step,
            training.neuron_compile,
            tags=environment.tags,
            network=network,
            bucket=bucket,
            key=key,
            role_arn=compile_role.role_arn,
            image=JobImage(images.uri(name, override), images.repository_arn(name, override)),
        )
        return NeuronCompile(request=self.compile_request, model_parameter=self.compiled_model_parameter)

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

    def _model_parameter(
        self, environment: EnvironmentFacts, *, compiled_backend: str | None = None
    ) -> ssm.StringParameter:
        """A well-known name per environment (the lookup handle for people and the serving side). Name is the
        parameter's only replacement trigger, so the fixed name can never collide with its own replacement.
        `compiled_backend`: the parameter of the model compiled for that backend, not of the merged one."""
        compiled = compiled_backend is not None
        kind = "compiled-model" if compiled else "model"
        what = f"Neuron-compiled model ({compiled_backend})" if compiled else "merged QLoRA model"
        return ssm.StringParameter(
            self,
            "CompiledModelParameter" if compiled else "ModelParameter",
            parameter_name=f"/{environment.app_name}/{environment.env_name}/training/{kind}-s3-uri",
            string_value="none",  # RecordModel / RecordCompiledModel overwrite it with the model's S3 prefix
            description=f"{environment.name}: S3 prefix of the latest {what}",
        )

    def _registration(
        self,
        training: TrainingConfig,
        served: ServedBackend | None,
        compile_step: CompileFacts | None,
        *,
        bucket: s3.IBucket,
        images: ContainerImages,
        code: s3_assets.Asset,
        group_name: str,
    ) -> RegistrationSettings:
        """ModelRegistration's settings: the gate, the serving backend's image and ml.inf2 type, the lineage's
        synth-time values (where the base model comes from, code asset hash)."""
        spec = compiled = None
        if served is not None:
            spec = ServingSpec(
                backend=served.backend,
                image_uri=images.uri(served.image, served.image_uri),
                instance_types=(served.instance_type,),
                environment=dict(served.model_environment),
            )
            if compile_step is not None:
                compiled = ServingSpec(
                    backend=served.backend,
                    image_uri=images.uri(compile_step.image, served.image_uri),
                    instance_types=(served.instance_type,),
                    environment=dict(served.model_environment),
                )
        base_key = training.base_model_key
        return RegistrationSettings(
            group_name=group_name,
            bucket_name=bucket.bucket_name,
            bucket_arn=bucket.bucket_arn,
            min_improvement=training.quality_gate.min_improvement,
            serving=spec,
            compiled_serving=compiled,
            base_model=f"s3://{bucket.bucket_name}/{base_key}" if base_key else f"{RUN.hyperparameters}.model_id",
            # where the compile step writes a model whose config.json records its compiled shape (LMI's partition)
            compiled_folder=compile_step.folder if compile_step is not None and compile_step.records_shape else None,
            code_asset_hash=code.asset_hash,
            max_benchmark_drop=training.quality_gate.max_benchmark_drop,
        )

    def _outputs(self, training: TrainingConfig, *, role: iam.IRole) -> None:
        CfnOutput(self, "StateMachineArn", value=self.state_machine.state_machine_arn)
        CfnOutput(self, "FailureTopicArn", value=self.topic.topic_arn)
        CfnOutput(self, "ModelParameterName", value=self.model_parameter.parameter_name)
        CfnOutput(self, "TrainingRoleArn", value=role.role_arn)
        if self.compiled_model_parameter is not None:
            CfnOutput(self, "CompiledModelParameterName", value=self.compiled_model_parameter.parameter_name)
        hyperparameters = json.dumps(dict(training.hyperparameters), sort_keys=True)
        CfnOutput(self, "DefaultHyperparameters", value=hyperparameters)
