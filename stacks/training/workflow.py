"""The training state machine: validate input, run the SageMaker job (.sync), register the model, record a model
that passed the quality gate, or notify.

    ValidateInput -> (input_checks.py: hyperparameter values and names, dataset marker -> folder) -> Defaults
        -> Prepare -> EvalData? -> Train | TrainWithEval -> TrainCompleted?
        -> (registry.py: quality gate, model facts, lineage) RegisterModel -> GatePassed? -> RecordModel
        -> [CompileForNeuron -> CompileCompleted? -> RecordCompiledModel -> RegisterCompiledModel] -> Done
    ValidateInput / each check --refused--> InvalidInput (or the check's own Invalid* state) -> Notify -> Failed
    Train* --capacity error--> CapacityRetry? -> WaitForCapacity -> NextAttempt -> EvalData?
    Train* / registry / RecordModel --any other error--> Notify -> Failed
    TrainCompleted --job not Completed (e.g. Stopped, MaxRuntimeExceeded)--> TrainNotCompleted -> Notify -> Failed
    GatePassed --registered Rejected--> ModelRejected -> Notify -> Failed (nothing recorded, nothing compiled)

Job names are `<prefix>-<md5(execution id)>-<capacity attempt>-<API retry>`: unique per try (SageMaker
never reuses a name), under the `<prefix>*` IAM scope, at most 63 characters. Checkpoints go to
`checkpoints/<prefix>-<md5>/`, shared by the tries of one execution so a retry resumes.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from aws_cdk import Stack
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_sns as sns
from aws_cdk import aws_ssm as ssm
from aws_cdk import aws_stepfunctions as sfn
from constructs import Construct

from ..code_contract.qlora import bool_spellings, hyperparameter_names
from ..config.training import TORCH_DISTRIBUTED
from ..shared.bucket_layout import DATASET_READY_MARKER, DATASETS_PREFIX
from ..shared.job_request import CREATE_TRAINING_JOB_SYNC, Ref, S3Channel, TrainingJobRequest
from ..shared.workflow_shell import (
    JOB_OUTCOME_SELECTOR,
    failure_path,
    job_completed,
    logged_state_machine,
    record_model_task,
    retry_api_errors,
)
from .input_checks import dataset_marker, hyperparameter_checks
from .registry import ModelRegistration

# A .sync job that fails reports States.TaskFailed; its Cause (the DescribeTrainingJob JSON) tells capacity apart.
CAPACITY_CAUSE_PATTERNS = ("*CapacityError*", "*InsufficientCapacity*")
MAX_JOB_NAME = 63


def run_name_expression(prefix: str) -> str:
    return f"States.Format('{prefix}-{{}}', States.Hash($$.Execution.Id, 'MD5'))"


def job_name_expression() -> Ref:
    return Ref("States.Format('{}-{}-{}', $.run.name, $.run.attempt, $$.State.RetryCount)")


def max_job_name_length(prefix: str) -> int:
    """Prefix, '-', 32 hex digits, then '-<attempt>-<retry>' with single digits (both are capped at 5)."""
    return len(prefix) + 1 + 32 + 4


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
        role_statements: Sequence[iam.PolicyStatement],
        compile_request: TrainingJobRequest | None = None,
        compiled_model_parameter: ssm.IStringParameter | None = None,
        distributed: bool = False,
        registration: Mapping | None = None,
    ) -> None:
        """`compile_request` (with `compiled_model_parameter`): the Neuron compile step after RecordModel;
        `distributed`: the job has several GPUs (torchrun), which ValidateInput's method / fsdp rules follow;
        `registration`: ModelRegistration's settings (registry.py), the package states between the job and
        RecordModel."""
        super().__init__(scope, construct_id)
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
        defaults = sfn.Pass(
            self,
            "Defaults",
            result=sfn.Result.from_object(
                {"config": dict(default_hyperparameters), "fixed": dict(fixed_hyperparameters)}
            ),
            result_path="$.defaults",
        )
        prepare = self._prepare(job_name_prefix, capacity_backoff_seconds)
        eval_data, train, train_eval = self._training_jobs(
            request, bucket_name, notify=notify, capacity_retries=capacity_retries
        )
        record = record_model_task(
            self, model_parameter=model_parameter, value_path="$.training.model_s3_uri", notify=notify
        )
        defaults.next(prepare).next(eval_data)
        self._registry = None
        trained: sfn.IChainable = record
        if registration is not None:  # the gate first: only a version that passed is recorded for serving
            self._registry = ModelRegistration(self, "Registry", notify=notify, **registration)
            self._registry.passed(record)
            trained = self._registry.start
        completed = job_completed(self, "TrainCompleted", result_path="$.training", notify=notify, next_state=trained)
        train_eval.next(completed)
        train.next(completed)
        self._finish(
            sfn.Chain.start(record),
            model_parameter=model_parameter,
            notify=notify,
            compile_request=compile_request,
            compiled_model_parameter=compiled_model_parameter,
        )
        marker = dataset_marker(self, bucket_name=bucket_name, notify=notify, next_state=defaults)
        checks = hyperparameter_checks(self, names=hyperparameter_names(), notify=notify, next_state=marker)
        valid = _valid_input(bucket_name, distributed)
        start = sfn.Choice(self, "ValidateInput").when(valid, checks).otherwise(invalid)
        self.state_machine = logged_state_machine(
            self,
            start=start,
            purpose="QLoRA training",
            comment="QLoRA training: SageMaker createTrainingJob.sync, model prefix to SSM, failures to SNS",
            role_statements=role_statements,
            topic=topic,
            key=key,
            model_parameter=model_parameter,
            log_retention_days=log_retention_days,
        )

    def _finish(
        self,
        chain: sfn.Chain,
        *,
        model_parameter: ssm.IStringParameter,
        notify: sfn.IChainable,
        compile_request: TrainingJobRequest | None,
        compiled_model_parameter: ssm.IStringParameter | None,
    ) -> None:
        """After RecordModel: the optional compile step, then `Done` with where the models are."""
        output = {
            "job_name.$": "$.training.job_name",
            "model_s3_uri.$": "$.training.model_s3_uri",
            "train_data.$": "$.train_data",
            "hyperparameters.$": "$.run.hyperparameters",
            "model_parameter": model_parameter.parameter_name,
        }
        if self._registry is not None:
            output.update({"model_package_arn.$": "$.registry.model_package_arn", "approval.$": "$.approval"})
        if compile_request is not None:
            chain = chain.next(self._compile(compile_request, notify=notify, parameter=compiled_model_parameter))
            if self._registry is not None and self._registry.register_compiled is not None:
                chain = chain.next(self._registry.register_compiled)
                output["compiled_model_package_arn.$"] = "$.registry_compiled.model_package_arn"
            output.update(
                {
                    "compile_job_name.$": "$.compile.job_name",
                    "compiled_model_s3_uri.$": "$.compile.model_s3_uri",
                    "compiled_model_parameter": compiled_model_parameter.parameter_name,
                }
            )
        chain.next(sfn.Pass(self, "Done", parameters=output))

    def _training_jobs(
        self, request: TrainingJobRequest, bucket_name: str, *, notify: sfn.IChainable, capacity_retries: int
    ) -> tuple[sfn.Choice, sfn.CustomState, sfn.CustomState]:
        """(`EvalData`, `Train`, `TrainWithEval`). CreateTrainingJob's channel list is one value: an execution
        with eval_data runs the twin job state whose list ends with an `eval` channel (same data type and
        distribution as `training`). Both retry on capacity through `EvalData`."""
        train = self._train(request.channels, request, bucket_name, "Train")
        evaluated = [*request.channels, S3Channel("eval", Ref("$.eval_data"))]
        train_eval = self._train(evaluated, request, bucket_name, "TrainWithEval")
        eval_data = sfn.Choice(self, "EvalData").when(sfn.Condition.is_present("$.eval_data"), train_eval)
        eval_data.otherwise(train)
        self._capacity_retry([train, train_eval], eval_data, notify=notify, capacity_retries=capacity_retries)
        return eval_data, train, train_eval

    def _prepare(self, job_name_prefix: str, capacity_backoff_seconds: int) -> sfn.Pass:
        """`$.run`: the run name, attempt 0, the first capacity wait, the merged hyperparameters."""
        return sfn.Pass(
            self,
            "Prepare",
            parameters={
                "name.$": run_name_expression(job_name_prefix),
                "attempt": 0,
                "wait_seconds": capacity_backoff_seconds,
                # Per-execution overrides win over config; the script-mode keys win over both.
                "hyperparameters.$": "States.JsonMerge(States.JsonMerge($.defaults.config, $.hyperparameters, false), "
                "$.defaults.fixed, false)",
            },
            result_path="$.run",
        )

    def _train(
        self, channels: Sequence[S3Channel], request: TrainingJobRequest, bucket_name: str, construct_id: str
    ) -> sfn.CustomState:
        """`Train`: CreateTrainingJob.sync of `request` with these `channels`, with the API retries; the merged
        model's prefix into `$.training`."""
        partition = Stack.of(self).partition
        parameters = {**request.to_asl(), "InputDataConfig": [c.to_asl() for c in channels]}
        train = sfn.CustomState(
            self,
            construct_id,
            state_json={
                "Type": "Task",
                "Resource": CREATE_TRAINING_JOB_SYNC.format(partition=partition),
                "Parameters": parameters,
                "ResultSelector": {
                    "job_name.$": "$.TrainingJobName",
                    "job_arn.$": "$.TrainingJobArn",
                    **JOB_OUTCOME_SELECTOR,
                    "model_s3_uri.$": f"States.Format('s3://{bucket_name}/models/{{}}/output/model/', "
                    "$.TrainingJobName)",
                },
                "ResultPath": "$.training",
            },
        )
        retry_api_errors(train)
        return train

    def _compile(
        self, request: TrainingJobRequest, *, notify: sfn.IChainable, parameter: ssm.IStringParameter
    ) -> sfn.Chain:
        """`CompileForNeuron` (the export job, .sync, API retries) -> `CompileCompleted`? -> `RecordCompiledModel`;
        failures and a job that did not complete notify."""
        state = sfn.CustomState(
            self,
            "CompileForNeuron",
            state_json={
                "Type": "Task",
                "Resource": CREATE_TRAINING_JOB_SYNC.format(partition=Stack.of(self).partition),
                "Parameters": request.to_asl(),
                "ResultSelector": {
                    "job_name.$": "$.TrainingJobName",
                    **JOB_OUTCOME_SELECTOR,
                    "model_s3_uri.$": "States.Format('{}{}/output/model/', $.OutputDataConfig.S3OutputPath, "
                    "$.TrainingJobName)",
                },
                "ResultPath": "$.compile",
            },
        )
        retry_api_errors(state)
        state.add_catch(notify, errors=["States.ALL"], result_path="$.error")
        record = record_model_task(
            self,
            construct_id="RecordCompiledModel",
            model_parameter=parameter,
            value_path="$.compile.model_s3_uri",
            notify=notify,
        )
        state.next(job_completed(self, "CompileCompleted", result_path="$.compile", notify=notify, next_state=record))
        return sfn.Chain.custom(state, record.end_states, record)

    def _capacity_retry(
        self,
        trains: Sequence[sfn.CustomState],
        again: sfn.IChainable,
        *,
        notify: sfn.IChainable,
        capacity_retries: int,
    ) -> None:
        """A capacity failure of any of `trains` waits (doubling), then starts the next attempt under a new name
        through `again` (the EvalData choice, which picks the same job state); other failures notify."""
        next_attempt = sfn.Pass(
            self,
            "NextAttempt",
            parameters={
                "name.$": "$.run.name",
                "attempt.$": "States.MathAdd($.run.attempt, 1)",
                "wait_seconds.$": "States.MathAdd($.run.wait_seconds, $.run.wait_seconds)",
                "hyperparameters.$": "$.run.hyperparameters",
            },
            result_path="$.run",
        )
        wait = sfn.Wait(self, "WaitForCapacity", time=sfn.WaitTime.seconds_path("$.run.wait_seconds"))
        wait.next(next_attempt).next(again)
        capacity = (
            sfn.Choice(self, "CapacityRetry")
            .when(
                sfn.Condition.and_(
                    sfn.Condition.is_present("$.error.Cause"),
                    sfn.Condition.or_(
                        *(sfn.Condition.string_matches("$.error.Cause", p) for p in CAPACITY_CAUSE_PATTERNS)
                    ),
                    sfn.Condition.number_less_than("$.run.attempt", capacity_retries),
                ),
                wait,
            )
            .otherwise(notify)
        )
        for train in trains:
            train.add_catch(capacity, errors=["States.TaskFailed"], result_path="$.error")
            train.add_catch(notify, errors=["States.ALL"], result_path="$.error")


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
        sfn.Condition.not_(sfn.Condition.is_present("$.eval_data")),
        sfn.Condition.and_(
            sfn.Condition.is_string("$.eval_data"),
            sfn.Condition.string_matches("$.eval_data", datasets),
            sfn.Condition.not_(sfn.Condition.string_matches("$.eval_data", f"*/{DATASET_READY_MARKER}")),
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
        sfn.Condition.is_present("$.train_data"),
        sfn.Condition.is_string("$.train_data"),
        sfn.Condition.string_matches("$.train_data", datasets),
        sfn.Condition.is_present("$.hyperparameters"),
        *(sfn.Condition.not_(getattr(sfn.Condition, test)("$.hyperparameters")) for test in scalar),
        sfn.Condition.not_(_is_bool("$.hyperparameters.merge", False)),
        eval_data,
        sfn.Condition.not_(sfn.Condition.is_present(f"$.hyperparameters.{TORCH_DISTRIBUTED}")),
        shape,
    )
