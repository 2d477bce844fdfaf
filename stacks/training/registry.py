"""Registering each run in the environment's SageMaker model package group, before anything records it.

    DescribeRun -> HasMetrics? -> MetricNames -> HasEvaluation? -> GateMetric -> QualityGate? -> Pending | Rejected
        (no metric at all, or no `eval_loss_improvement`: RejectedNoEvaluation)
    -> ReadModelFacts -> MarkerVersion? -> DatasetPrefix? -> ListDatasetVersions -> WriteLineage -> RegisterModel
    -> GatePassed? -> (PendingManualApproval) the caller's next state: RecordModel
                   -> (Rejected) ModelRejected -> Notify -> Failed
    [after RecordCompiledModel: RegisterCompiledModel, the compiled model as its own package version]

The gate compares the job's `eval_loss_improvement` metric (base - merged eval loss on the same held-out tokens,
training_code/qlora) with `training.quality_gate.min_improvement`: below it, the package is `Rejected`, else
`PendingManualApproval`; nothing here approves. Only a version that passed goes on to be recorded for serving
(the SSM model parameter, the compile step); a rejected one is registered with its metrics and ends the
execution `ModelRejected`, its cause naming the version, the improvement and the minimum.

The package's metadata says what serving needs to know about the model, from model_facts.json, which train.py
writes into the model folder from the saved files (finetune/facts.py: architecture, parameter count, context
length, dtype, heads, chat template, base model), never from config. CustomerMetadataProperties holds at most
256 characters of `[\\p{L}\\p{Z}\\p{N}_.:/=+\\-@]` per value (no JSON): each fact is one entry (numbers and
booleans as their JSON text), and the full lineage (every current object version under the dataset's folder, the
merged hyperparameters, base model, code asset hash, the facts) is a JSON manifest written beside the model,
`models/<job>/lineage.json`; the metadata names it and its S3 version id, and carries the short facts: training
job, dataset prefix and the S3 version id of its `_READY` marker (from the S3 event; `absent` for a run started
without one), code asset hash.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from aws_cdk import Stack
from aws_cdk import aws_stepfunctions as sfn
from aws_cdk import aws_stepfunctions_tasks as tasks
from constructs import Construct

from ..code_contract.qlora import model_facts_schema
from ..shared.bucket_layout import MODELS_PREFIX
from ..shared.state_grants import StateGrants
from .benchmark_job import benchmark_metadata, benchmark_rejection, benchmark_verdict
from .lineage import LINEAGE_FILE, LineageStates
from .outcomes import MODEL_REJECTED
from .registry_grants import PENDING, REJECTED, registry_grants
from .state_paths import APPROVAL, COMPILE, REGISTRY, REGISTRY_COMPILED, TRAIN_DATA, TRAINING

GATE_METRIC = "eval_loss_improvement"
EVALUATION_FILE = "evaluation.json"  # written by train.py into the model folder
FACTS_FILE, FACT_TYPES = model_facts_schema()  # written by train.py beside it


def facts_key(job_name_path: str) -> str:
    """`models/<job>/output/model/model_facts.json`, where the job's model folder lands."""
    return sfn.JsonPath.format(f"{MODELS_PREFIX}{{}}/output/model/{FACTS_FILE}", sfn.JsonPath.string_at(job_name_path))


def facts_metadata(path: str) -> dict[str, str]:
    """One metadata entry per fact at `path`, under the fact's name: strings as they are, numbers and booleans as
    their JSON text (`6738415616`, `true`)."""
    return {
        name: sfn.JsonPath.string_at(f"{path}.{name}")
        if kind == "str"
        else sfn.JsonPath.json_to_string(sfn.JsonPath.object_at(f"{path}.{name}"))
        for name, kind in FACT_TYPES.items()
    }


# CustomerMetadataProperties of a compiled version <- its config.json `neuron` keys (djl_python neuron_utils
# model_loader.py update_model_config_to_neuron); the lock's `compiled` section has the same names.
COMPILED_FACTS = {
    "compiled_tensor_parallel_degree": "num_cores",
    "compiled_n_positions": "sequence_length",
    "compiled_batch_size": "batch_size",
    "compiled_dtype": "auto_cast_type",
    "compiler_version": "compiler_version",
}


def compiled_facts_metadata(path: str) -> dict[str, str]:
    """Numbers as their JSON text, strings as they are (the values' alphabet allows `+` of `2.15.141.0+<hash>`)."""
    text = ("compiled_dtype", "compiler_version")
    return {
        name: sfn.JsonPath.string_at(f"{path}.{key}")
        if name in text
        else sfn.JsonPath.json_to_string(sfn.JsonPath.object_at(f"{path}.{key}"))
        for name, key in COMPILED_FACTS.items()
    }


@dataclass(frozen=True)
class ServingSpec:
    """What a package says about serving: the backend's image, the ml.inf2 types, where the container
    finds the model (an uncompressed S3 prefix at /opt/ml/model)."""

    backend: str
    image_uri: str
    instance_types: tuple[str, ...]
    environment: Mapping[str, str]

    def inference_specification(self, model_s3_uri_path: str) -> dict:
        container = {
            "Image": self.image_uri,
            "ModelDataSource": {
                "S3DataSource": {
                    "S3Uri": sfn.JsonPath.string_at(model_s3_uri_path),
                    "S3DataType": "S3Prefix",
                    "CompressionType": "None",
                }
            },
            "Environment": dict(self.environment),
        }
        return {
            "Containers": [container],
            "SupportedRealtimeInferenceInstanceTypes": list(self.instance_types),
            "SupportedContentTypes": ["application/json"],
            "SupportedResponseMIMETypes": ["application/json"],
        }


@dataclass(frozen=True)
class RegistrationSettings:
    """What ModelRegistration is told at synth. `base_model`: where the base model came from (the model channel's
    S3 URI, or a JSONPath such as `$.run.hyperparameters.model_id`), recorded as `base_model_source` beside the
    facts' own `base_model`; `compiled_folder`: the compile step writes a model whose config.json records its
    compiled shape (LMI's partition), read into the compiled version's metadata; `bucket_arn`: the bucket's ARN,
    the scope of the registry's grants; `max_benchmark_drop`: the benchmark job ran (benchmark_job.py), and a
    version the loss gate passed is registered Rejected unless its benchmark verdict passed too."""

    group_name: str
    bucket_name: str
    bucket_arn: str
    min_improvement: float
    serving: ServingSpec | None
    compiled_serving: ServingSpec | None
    base_model: str
    code_asset_hash: str
    compiled_folder: str | None = None
    max_benchmark_drop: float | None = None


class ModelRegistration(LineageStates):
    """The states after the training job (`start`; `then(next_state)` continues a version that passed the gate)
    and, for the compile step, `register_compiled`; what they call, granted to the state machine that reaches
    them (`state_machine_grants`, registry_grants.py)."""

    def __init__(
        self, scope: Construct, construct_id: str, *, settings: RegistrationSettings, notify: sfn.IChainable
    ) -> None:
        super().__init__(scope, construct_id)
        self._settings = settings
        self._group, self._bucket, self._notify = settings.group_name, settings.bucket_name, notify
        self._base_model, self._code_hash = settings.base_model, settings.code_asset_hash
        self._register_model = self._register(
            "RegisterModel", settings.serving, TRAINING.model_s3_uri, REGISTRY.path, {}
        )
        lineage = self._lineage(self._register_model)
        self.start = self._gate(settings.min_improvement, self._facts(self._marker_version(lineage)))
        self.register_compiled = None
        if settings.compiled_serving is not None:
            self.register_compiled = self._registered_compiled(settings)

    def state_machine_grants(self) -> StateGrants:
        return registry_grants(
            Stack.of(self),
            bucket_arn=self._settings.bucket_arn,
            group_name=self._group,
            facts_file=FACTS_FILE,
            lineage_file=LINEAGE_FILE,
            compiled_folder=self._settings.compiled_folder,
        )

    def _registered_compiled(self, settings: RegistrationSettings) -> sfn.IChainable:
        """`[ReadCompiledFacts ->] RegisterCompiledModel`: the compiled model as its own package version."""
        extra = {
            "compile_job": sfn.JsonPath.string_at(COMPILE.job_name),
            "merged_package": sfn.JsonPath.string_at(REGISTRY.model_package_arn),
        }
        if settings.compiled_folder is not None:
            extra.update(compiled_facts_metadata("$.compiled.config.neuron"))
        register = self._register(
            "RegisterCompiledModel", settings.compiled_serving, COMPILE.model_s3_uri, REGISTRY_COMPILED.path, extra
        )
        if settings.compiled_folder is None:
            return register
        return sfn.Chain.start(self._compiled_facts(settings.compiled_folder)).next(register)

    def _task(
        self,
        construct_id: str,
        service: str,
        action: str,
        parameters: dict,
        result_selector: dict,
        result_path: str,
        iam_resources: list[str],
    ) -> tasks.CallAwsService:
        task = tasks.CallAwsService(
            self,
            construct_id,
            service=service,
            action=action,
            parameters=parameters,
            result_selector=result_selector,
            result_path=result_path,
            iam_resources=iam_resources,  # the statements: state_machine_grants
        )
        task.add_catch(self._notify, errors=["States.ALL"], result_path="$.error")
        return task

    def then(self, next_state: sfn.IChainable) -> sfn.Choice:
        """`GatePassed`: after RegisterModel, only a PendingManualApproval version goes on to `next_state`; a
        Rejected one ends in `ModelRejected` -> Notify -> Failed, its cause naming the version and the figures."""
        rejected = sfn.Pass(
            self,
            "ModelRejected",
            parameters={
                "Error": MODEL_REJECTED,
                "Cause.$": "States.Format('model package {} (training job {}) is registered Rejected by the quality "
                f"gate: {GATE_METRIC} {{}}, minimum {{}}; nothing is recorded for serving', "
                f"{REGISTRY.model_package_arn}, {TRAINING.job_name}, {APPROVAL}.improvement, "
                f"{APPROVAL}.min_improvement)",
            },
            result_path="$.error",
        )
        rejected.next(self._notify)
        gate = sfn.Condition.string_equals(f"{APPROVAL}.status", PENDING)
        choice = sfn.Choice(self, "GatePassed").when(gate, next_state)
        if self._settings.max_benchmark_drop is not None:
            choice.when(*benchmark_rejection(self, self._notify, REGISTRY.model_package_arn))
        choice.otherwise(rejected)
        self._register_model.next(choice)
        return choice

    def _facts(self, next_state: sfn.IChainable) -> sfn.IChainable:
        """`ReadModelFacts`: model_facts.json of the job's model folder into `$.model.facts` (GetObject's Body is
        the object's text; a missing file fails the run: a model without facts is not registered)."""
        read = self._task(
            "ReadModelFacts",
            "s3",
            "getObject",
            {"Bucket": self._bucket, "Key": facts_key(TRAINING.job_name)},
            {"facts.$": "States.StringToJson($.Body)"},
            "$.model",
            [f"arn:aws:s3:::{self._bucket}/{MODELS_PREFIX}*/output/model/{FACTS_FILE}"],
        )
        read.next(next_state)
        return read

    def _compiled_facts(self, folder: str) -> tasks.CallAwsService:
        """`ReadCompiledFacts`: the compiled model's own config.json into `$.compiled.config` (its `neuron` section,
        written by transformers-neuronx's loader: TP, positions, batch, dtype, neuronx-cc version)."""
        key = sfn.JsonPath.format(
            f"{MODELS_PREFIX}{{}}/{folder}{{}}/output/model/config.json",
            sfn.JsonPath.string_at(TRAINING.job_name),
            sfn.JsonPath.string_at(COMPILE.job_name),
        )
        return self._task(
            "ReadCompiledFacts",
            "s3",
            "getObject",
            {"Bucket": self._bucket, "Key": key},
            {"config.$": "States.StringToJson($.Body)"},
            "$.compiled",
            [f"arn:aws:s3:::{self._bucket}/{MODELS_PREFIX}*/{folder}*/output/model/config.json"],
        )

    def _gate(self, min_improvement: float, next_state: sfn.IChainable) -> sfn.IChainable:
        describe = self._task(
            "DescribeRun",
            "sagemaker",
            "describeTrainingJob",
            {"TrainingJobName": sfn.JsonPath.string_at(TRAINING.job_name)},
            # The whole description: DescribeTrainingJob leaves FinalMetricDataList out for a job that logged no
            # metric, and a ResultSelector path that is absent fails the run with States.Runtime, which no Catch sees.
            {"job.$": "$"},
            "$.evaluation",
            ["*"],
        )
        names = sfn.Pass(
            self,
            "MetricNames",
            parameters={
                "has_gate_metric.$": f"States.ArrayContains($.evaluation.job.FinalMetricDataList[*].MetricName, "
                f"'{GATE_METRIC}')",
                "metrics.$": "$.evaluation.job.FinalMetricDataList",
            },
            result_path="$.evaluation",
        )
        value = sfn.Pass(
            self,
            "GateMetric",
            parameters={
                "improvement.$": f"$.evaluation.metrics[?(@.MetricName == '{GATE_METRIC}')].Value",
            },
            result_path="$.evaluation",
        )

        measured = "States.Format('{}', $.evaluation.improvement[0])"
        pending = self._decision("Pending", PENDING, measured, min_improvement)
        rejected = self._decision("Rejected", REJECTED, measured, min_improvement)
        no_evaluation = self._decision("RejectedNoEvaluation", REJECTED, None, min_improvement)
        benchmarked = self._settings.max_benchmark_drop is not None
        pending.next(benchmark_verdict(self, next_state) if benchmarked else next_state)
        for state in (rejected, no_evaluation):
            state.next(next_state)
        gate = (
            sfn.Choice(self, "QualityGate")
            .when(sfn.Condition.number_greater_than_equals("$.evaluation.improvement[0]", min_improvement), pending)
            .otherwise(rejected)
        )
        value.next(gate)
        has = (
            sfn.Choice(self, "HasEvaluation")
            .when(sfn.Condition.boolean_equals("$.evaluation.has_gate_metric", True), value)
            .otherwise(no_evaluation)
        )
        names.next(has)
        metrics = (
            sfn.Choice(self, "HasMetrics")
            .when(sfn.Condition.is_present("$.evaluation.job.FinalMetricDataList"), names)
            .otherwise(no_evaluation)
        )
        describe.next(metrics)
        return describe

    def _decision(self, construct_id: str, status: str, improvement: str | None, min_improvement: float) -> sfn.Pass:
        """The gate's verdict at `APPROVAL`: the status the package is registered with, and the figures its
        metadata and a rejection's cause name (`none` where the job logged no improvement)."""
        fields = {"status": status, "min_improvement": f"{min_improvement:g}"}
        if improvement is None:
            fields["improvement"] = "none"
        else:
            fields["improvement.$"] = improvement
        return sfn.Pass(self, construct_id, parameters=fields, result_path=APPROVAL)

    def _register(
        self,
        construct_id: str,
        serving: ServingSpec | None,
        model_path: str,
        result_path: str,
        extra_metadata: Mapping[str, str],
    ) -> tasks.CallAwsService:
        """CreateModelPackage: a new version in the group, its status from the gate."""
        metadata = {
            **facts_metadata("$.model.facts"),
            "training_job": sfn.JsonPath.string_at(TRAINING.job_name),
            "dataset": sfn.JsonPath.string_at(TRAIN_DATA),
            "dataset_prefix": sfn.JsonPath.string_at("$.lineage.prefix"),
            "dataset_marker_version_id": sfn.JsonPath.string_at("$.marker.version_id"),
            "dataset_objects": sfn.JsonPath.format(
                "{}", sfn.JsonPath.array_length(sfn.JsonPath.list_at("$.lineage_manifest.objects"))
            ),
            "lineage": sfn.JsonPath.format(
                f"s3://{self._bucket}/{MODELS_PREFIX}{{}}/{LINEAGE_FILE}", sfn.JsonPath.string_at(TRAINING.job_name)
            ),
            "lineage_version_id": sfn.JsonPath.string_at("$.lineage_object.version_id"),
            "base_model_source": self._base_model_value(),
            "code_asset_hash": self._code_hash,
            "eval_loss_improvement": sfn.JsonPath.string_at(f"{APPROVAL}.improvement"),
            "quality_gate_min_improvement": sfn.JsonPath.string_at(f"{APPROVAL}.min_improvement"),
            **(benchmark_metadata() if self._settings.max_benchmark_drop is not None else {}),
            **extra_metadata,
        }
        parameters = {
            "ModelPackageGroupName": self._group,
            "ModelPackageDescription": sfn.JsonPath.format(
                "Training job {}: {}", sfn.JsonPath.string_at(TRAINING.job_name), sfn.JsonPath.string_at(model_path)
            ),
            "ModelApprovalStatus": sfn.JsonPath.string_at(f"{APPROVAL}.status"),
            "ModelMetrics": {
                "ModelQuality": {
                    "Statistics": {
                        "ContentType": "application/json",
                        "S3Uri": sfn.JsonPath.format(
                            f"{{}}{EVALUATION_FILE}", sfn.JsonPath.string_at(TRAINING.model_s3_uri)
                        ),
                    }
                }
            },
            "CustomerMetadataProperties": metadata,
        }
        if serving is not None:
            metadata["serving_backend"] = serving.backend
            parameters["InferenceSpecification"] = serving.inference_specification(model_path)
        stack = Stack.of(self)
        return self._task(
            construct_id,
            "sagemaker",
            "createModelPackage",
            parameters,
            {"model_package_arn.$": "$.ModelPackageArn"},
            result_path,
            [stack.format_arn(service="sagemaker", resource="model-package", resource_name=f"{self._group}/*")],
        )
