"""The training state machine: validate input, run the SageMaker job (.sync), register the model, record a model
that passed the quality gate, or notify.

    ValidateInput -> (input_checks.py: hyperparameter values and names, dataset marker -> folder)
        -> [StagedTask<i>] -> Defaults -> Prepare -> EvalData? -> Train | TrainWithEval -> TrainCompleted?
        -> [Benchmark -> its verdict (benchmark_job.py, where training.benchmark names tasks)]
        -> (registry.py: quality gate, model facts, lineage) RegisterModel -> GatePassed? -> RecordModel
        -> [CompileForNeuron -> CompileCompleted? -> RecordCompiledModel -> RegisterCompiledModel] -> Done
    ValidateInput / each check --refused--> InvalidInput (or the check's own Invalid* state) -> Notify -> Failed
    Train* --capacity error--> CapacityRetry? -> WaitForCapacity -> NextAttempt -> EvalData?
    Train* / registry / RecordModel --any other error--> Notify -> Failed
    TrainCompleted --job not Completed (e.g. Stopped, MaxRuntimeExceeded)--> TrainNotCompleted -> Notify -> Failed
    GatePassed --registered Rejected--> ModelRejected -> Notify -> Failed (nothing recorded, nothing compiled)

Each SageMaker job is a SageMakerJobStep (stacks/shared/sagemaker_job_step.py: request, result, API retries,
completed check, both sides of its access); the state machine's role holds what the states reachable from
ValidateInput need (stacks/shared/state_grants.py); the happy path is `in_order(...)` below, and every state
path two parts share is named in state_paths.py.

Job names are `<prefix>-<md5(execution id)>-<capacity attempt>-<API retry>`: unique per try (SageMaker
never reuses a name), under the `<prefix>*` IAM scope, at most 63 characters. Checkpoints go to
`checkpoints/<prefix>-<md5>/`, shared by the tries of one execution so a retry resumes.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace

from aws_cdk import aws_kms as kms
from aws_cdk import aws_sns as sns
from aws_cdk import aws_ssm as ssm
from aws_cdk import aws_stepfunctions as sfn
from constructs import Construct

from ..code_contract.qlora import bool_spellings, hyperparameter_names
from ..config.training import TORCH_DISTRIBUTED
from ..shared.bucket_layout import DATASET_READY_MARKER, DATASETS_PREFIX
from ..shared.job_request import Ref, S3Channel, TrainingJobRequest
from ..shared.sagemaker_job_step import TRAINING_JOB, JobCatch, JobVariant, SageMakerJobStep
from ..shared.workflow_shell import failure_path, in_order, logged_state_machine, record_model_task
from .benchmark_job import BenchmarkPlan, BenchmarkRun, StagedTasks
from .input_checks import Check, dataset_marker, hyperparameter_checks
from .registry import ModelRegistration, RegistrationSettings
from .state_paths import APPROVAL, COMPILE, ERROR, EVAL_DATA, REGISTRY, REGISTRY_COMPILED, RUN, TRAIN_DATA, TRAINING

# A .sync job that fails reports States.TaskFailed; its Cause (the DescribeTrainingJob JSON) tells capacity apart.
CAPACITY_CAUSE_PATTERNS = ("*CapacityError*", "*InsufficientCapacity*")
MAX_JOB_NAME = 63


def run_name_expression(prefix: str) -> str:
    return f"States.Format('{prefix}-{{}}', States.Hash($$.Execution.Id, 'MD5'))"


def job_name_expression() -> Ref:
    return Ref(f"States.Format('{{}}-{{}}-{{}}', {RUN.name}, {RUN.attempt}, $$.State.RetryCount)")


def max_job_name_length(prefix: str) -> int:
    """Prefix, '-', 32 hex digits, then '-<attempt>-<retry>' with single digits (both are capped at 5)."""
    return len(prefix) + 1 + 32 + 4


@dataclass(frozen=True)
class NeuronCompile:
    """The compile step after RecordModel: its job request and the parameter the compiled model goes to."""

    request: TrainingJobRequest
    model_parameter: ssm.IStringParameter


class TrainingWorkflow(Construct):
    """The state machine and its log group; `request` is built by the caller with Refs into `$.run`."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        request: TrainingJobRequest,
        job_name_prefix: str,
        bucket_name: str,
        default_hyperparameters: Mapping[str, str],
        fixed_hyperparameters: Mapping[str, str],
        topic: sns.ITopic,
        model_parameter: ssm.IStringParameter,
        capacity_retries: int,
        capacity_backoff_seconds: int,
        log_retention_days: int,
        key: kms.IKey,
        registration: RegistrationSettings,
        compile_step: NeuronCompile | None = None,
        distributed: bool = False,
        benchmark: BenchmarkPlan | None = None,
    ) -> None:
        """`compile_step`: the Neuron compile after RecordModel; `distributed`: the job has several GPUs
        (torchrun), which ValidateInput's method / fsdp rules follow; `benchmark`: the benchmark job between
        the merge and the registry, its tasks checked staged before any job (benchmark_job.py)."""
        super().__init__(scope, construct_id)
        self._prefix = job_name_prefix
        start, checks, notify = self._validated_start(bucket_name, topic=topic, distributed=distributed)
        marker = dataset_marker(self, bucket_name=bucket_name, notify=notify)
        defaults = self._defaults(default_hyperparameters, fixed_hyperparameters)
        prepare = self._prepare(capacity_backoff_seconds)
        train = self._train(request, bucket_name, notify=notify, capacity_retries=capacity_retries)
        # The gate first: only a version that passed is recorded for serving.
        registry = ModelRegistration(self, "Registry", settings=registration, notify=notify)
        record = record_model_task(
            self, model_parameter=model_parameter, value_path=TRAINING.model_s3_uri, notify=notify
        )
        compiled = []
        if compile_step is not None:
            compile_job, record_compiled = self._compile(compile_step, notify=notify)
            compiled = [compile_job, record_compiled, *filter(None, [registry.register_compiled])]
        done = sfn.Pass(self, "Done", parameters=self._output(model_parameter, registry, compile_step))
        staged, scored = [], []
        if benchmark is not None:
            staged = [StagedTasks(self, "StagedTasks", plan=benchmark, notify=notify)]
            scored = [BenchmarkRun(self, "BenchmarkRun", plan=benchmark, name_prefix=self._prefix, notify=notify)]
        in_order(checks, marker, *staged, defaults, prepare, train, *scored, registry, record, *compiled, done)
        self.state_machine = logged_state_machine(
            self,
            start=start,
            purpose="QLoRA training",
            comment="QLoRA training: SageMaker createTrainingJob.sync, model prefix to SSM, failures to SNS",
            topic=topic,
            key=key,
            model_parameter=model_parameter,
            log_retention_days=log_retention_days,
            log_retention_setting="training.log_retention_days",
        )

    def _validated_start(
        self, bucket_name: str, *, topic: sns.ITopic, distributed: bool
    ) -> tuple[sfn.Choice, Check, sfn.IChainable]:
        """(`ValidateInput`, the hyperparameter checks it leads to, `Notify`): an input that names no dataset
        under datasets/ or a flag train.py does not know fails before a job is paid for."""
        invalid, notify = failure_path(
            self,
            topic=topic,
            subject="Training failed",
            invalid_input_cause=(
                f'expected {{"train_data": "s3://{bucket_name}/{DATASETS_PREFIX}<file, folder/ or '
                f'folder/{DATASET_READY_MARKER}>", "hyperparameters": {{...}}}} and an optional "eval_data" '
                "file or folder under the same prefix; merge not false; see README, Training"
            ),
        )
        checks = hyperparameter_checks(self, names=hyperparameter_names(), notify=notify)
        start = sfn.Choice(self, "ValidateInput").when(_valid_input(bucket_name, distributed), checks.start)
        start.otherwise(invalid)
        return start, checks, notify

    def _defaults(self, configured: Mapping[str, str], fixed: Mapping[str, str]) -> sfn.Pass:
        """`$.defaults`: the config's hyperparameters and the script-mode keys, for Prepare to merge."""
        return sfn.Pass(
            self,
            "Defaults",
            result=sfn.Result.from_object({"config": dict(configured), "fixed": dict(fixed)}),
            result_path="$.defaults",
        )

    def _prepare(self, capacity_backoff_seconds: int) -> sfn.Pass:
        """`$.run`: the run name, attempt 0, the first capacity wait, the merged hyperparameters."""
        return sfn.Pass(
            self,
            "Prepare",
            parameters={
                "name.$": run_name_expression(self._prefix),
                "attempt": 0,
                "wait_seconds": capacity_backoff_seconds,
                # Per-execution overrides win over config; the script-mode keys win over both.
                "hyperparameters.$": "States.JsonMerge(States.JsonMerge($.defaults.config, $.hyperparameters, false), "
                "$.defaults.fixed, false)",
            },
            result_path=RUN.path,
        )

    def _train(
        self, request: TrainingJobRequest, bucket_name: str, *, notify: sfn.IChainable, capacity_retries: int
    ) -> SageMakerJobStep:
        """`EvalData`? -> `Train` | `TrainWithEval` -> `TrainCompleted`? CreateTrainingJob's channel list is one
        value: an execution with eval_data runs the twin whose list ends with an `eval` channel (same data type
        and distribution as `training`, under its prefix). A capacity failure of either retries through `EvalData`."""
        capacity = sfn.Choice(self, "CapacityRetry")  # the catch target, built before the job it catches for
        [training] = [c for c in request.channels if c.name == "training"]
        evaluated = replace(request, channels=[*request.channels, S3Channel("eval", Ref(EVAL_DATA), training.scope)])
        train = SageMakerJobStep(
            self,
            "Train",
            kind=TRAINING_JOB,
            request=request,
            variant=JobVariant("TrainWithEval", sfn.Condition.is_present(EVAL_DATA), evaluated),
            chooser="EvalData",
            output=TRAINING,
            identity={"job_arn.$": "$.TrainingJobArn"},
            values={
                "model_s3_uri.$": f"States.Format('s3://{bucket_name}/models/{{}}/output/model/', $.TrainingJobName)"
            },
            name_prefix=self._prefix,
            notify=notify,
            completed_check="TrainCompleted",
            catch=[JobCatch(("States.TaskFailed",), capacity)],
        )
        self._capacity_retry(capacity, again=train.start, notify=notify, capacity_retries=capacity_retries)
        return train

    def _capacity_retry(
        self, capacity: sfn.Choice, *, again: sfn.IChainable, notify: sfn.IChainable, capacity_retries: int
    ) -> None:
        """`CapacityRetry`: a capacity failure waits (doubling), then starts the next attempt under a new name
        through `again` (the EvalData choice, which picks the same job state); other failures notify."""
        wait = sfn.Wait(self, "WaitForCapacity", time=sfn.WaitTime.seconds_path(RUN.wait_seconds))
        next_attempt = sfn.Pass(
            self,
            "NextAttempt",
            parameters={
                "name.$": RUN.name,
                "attempt.$": f"States.MathAdd({RUN.attempt}, 1)",
                "wait_seconds.$": f"States.MathAdd({RUN.wait_seconds}, {RUN.wait_seconds})",
                "hyperparameters.$": RUN.hyperparameters,
            },
            result_path=RUN.path,
        )
        wait.next(next_attempt).next(again)
        cause = f"{ERROR}.Cause"
        capacity.when(
            sfn.Condition.and_(
                sfn.Condition.is_present(cause),
                sfn.Condition.or_(*(sfn.Condition.string_matches(cause, p) for p in CAPACITY_CAUSE_PATTERNS)),
                sfn.Condition.number_less_than(RUN.attempt, capacity_retries),
            ),
            wait,
        ).otherwise(notify)

    def _compile(
        self, compile_step: NeuronCompile, *, notify: sfn.IChainable
    ) -> tuple[SageMakerJobStep, sfn.IChainable]:
        """`CompileForNeuron` (the export job) -> `CompileCompleted`? -> `RecordCompiledModel`."""
        job = SageMakerJobStep(
            self,
            "CompileForNeuron",
            kind=TRAINING_JOB,
            request=compile_step.request,
            output=COMPILE,
            values={
                "model_s3_uri.$": "States.Format('{}{}/output/model/', $.OutputDataConfig.S3OutputPath, "
                "$.TrainingJobName)"
            },
            name_prefix=self._prefix,
            notify=notify,
            completed_check="CompileCompleted",
        )
        record = record_model_task(
            self,
            construct_id="RecordCompiledModel",
            model_parameter=compile_step.model_parameter,
            value_path=COMPILE.model_s3_uri,
            notify=notify,
        )
        return job, record

    @staticmethod
    def _output(
        model_parameter: ssm.IStringParameter, registry: ModelRegistration, compile_step: NeuronCompile | None
    ) -> dict[str, str]:
        """`Done`'s output: the job, where the models are, their package versions and parameters."""
        output = {
            "job_name.$": TRAINING.job_name,
            "model_s3_uri.$": TRAINING.model_s3_uri,
            "train_data.$": TRAIN_DATA,
            "hyperparameters.$": RUN.hyperparameters,
            "model_parameter": model_parameter.parameter_name,
            "model_package_arn.$": REGISTRY.model_package_arn,
            "approval.$": APPROVAL,
        }
        if compile_step is None:
            return output
        if registry.register_compiled is not None:
            output["compiled_model_package_arn.$"] = REGISTRY_COMPILED.model_package_arn
        return {
            **output,
            "compile_job_name.$": COMPILE.job_name,
            "compiled_model_s3_uri.$": COMPILE.model_s3_uri,
            "compiled_model_parameter": compile_step.model_parameter.parameter_name,
        }


def _is_bool(path: str, truth: bool) -> sfn.Condition:
    """`path` is present and one of train.py's spellings of `truth`."""
    return sfn.Condition.and_(
        sfn.Condition.is_present(path),
        sfn.Condition.or_(*(sfn.Condition.string_equals(path, v) for v in bool_spellings(truth))),
    )


def _valid_input(bucket_name: str, distributed: bool) -> sfn.Condition:
    """The input's shape: train_data (and eval_data, when given: a file or folder, not a marker) is a string
    under this bucket's datasets/; hyperparameters is an object or array (input_checks.py tells them apart); no
    override turns the merge off (the model folder would hold an adapter) or sets the launcher; on several GPUs
    method stays qlora, on one GPU fsdp stays off (stacks/config/training.py)."""
    datasets = f"s3://{bucket_name}/{DATASETS_PREFIX}*"
    eval_data = sfn.Condition.or_(
        sfn.Condition.not_(sfn.Condition.is_present(EVAL_DATA)),
        sfn.Condition.and_(
            sfn.Condition.is_string(EVAL_DATA),
            sfn.Condition.string_matches(EVAL_DATA, datasets),
            sfn.Condition.not_(sfn.Condition.string_matches(EVAL_DATA, f"*/{DATASET_READY_MARKER}")),
        ),
    )
    scalar = ("is_string", "is_numeric", "is_boolean", "is_null")
    shape = (
        sfn.Condition.or_(
            sfn.Condition.not_(sfn.Condition.is_present("$.hyperparameters.method")),
            sfn.Condition.string_equals("$.hyperparameters.method", "qlora"),
        )
        if distributed
        else sfn.Condition.not_(_is_bool("$.hyperparameters.fsdp", True))
    )
    return sfn.Condition.and_(
        sfn.Condition.is_present(TRAIN_DATA),
        sfn.Condition.is_string(TRAIN_DATA),
        sfn.Condition.string_matches(TRAIN_DATA, datasets),
        sfn.Condition.is_present("$.hyperparameters"),
        *(sfn.Condition.not_(getattr(sfn.Condition, test)("$.hyperparameters")) for test in scalar),
        sfn.Condition.not_(_is_bool("$.hyperparameters.merge", False)),
        eval_data,
        sfn.Condition.not_(sfn.Condition.is_present(f"$.hyperparameters.{TORCH_DISTRIBUTED}")),
        shape,
    )
