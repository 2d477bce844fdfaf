"""The Step Functions SageMaker integration on the emulator: `createTrainingJob.sync` and
`createHyperParameterTuningJob.sync`, with the jobs run by the LocalJobRunner.

moto 5.2's ASL interpreter (ported from LocalStack) has one service class per integration and lists
`sagemaker` as unsupported (it forwards the call and cannot wait for `.sync`). `install()` registers this
class in the interpreter's own factory (`state_task_service_for`), the hook point its other integrations use.
Like the real integration it calls the API (moto records the job, so DescribeTrainingJob and ListTrainingJobs
answer as usual), waits for the job's end and returns DescribeTrainingJob's (DescribeHyperParameterTuningJob's)
answer; a job that ends Failed fails the task with `States.TaskFailed` and the description as Cause.

A job that ends Stopped (StopTrainingJob, or MaxRuntimeInSeconds: SecondaryStatus MaxRuntimeExceeded) returns
its description as the task's result: what real `.sync` does then is not documented, and this is the stricter
test of a workflow (it must look at TrainingJobStatus itself; one that does is equally safe if AWS fails the
task instead, since a failed task goes to the same Catch). An API error carries the name Step Functions gives
it (`api_error_name`).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any, Final

import botocore.session
from botocore.exceptions import ClientError
from moto.sagemaker import models as sagemaker_models
from moto.stepfunctions.parser.api import HistoryEventType, TaskFailedEventDetails
from moto.stepfunctions.parser.asl.component.common.error_name.custom_error_name import CustomErrorName
from moto.stepfunctions.parser.asl.component.common.error_name.failure_event import (
    FailureEvent,
    FailureEventException,
)
from moto.stepfunctions.parser.asl.component.common.error_name.states_error_name import StatesErrorName
from moto.stepfunctions.parser.asl.component.common.error_name.states_error_name_type import StatesErrorNameType
from moto.stepfunctions.parser.asl.component.state.exec.state_task import state_task_factory
from moto.stepfunctions.parser.asl.component.state.exec.state_task.service import state_task_service_factory
from moto.stepfunctions.parser.asl.component.state.exec.state_task.service.resource import ResourceCondition
from moto.stepfunctions.parser.asl.component.state.exec.state_task.service.state_task_service_callback import (
    StateTaskServiceCallback,
)
from moto.stepfunctions.parser.asl.eval.event.event_detail import EventDetails
from moto.stepfunctions.parser.asl.utils import boto_client
from moto.stepfunctions.parser.asl.utils.encoding import to_json_str

from . import tuning
from .job_runner import JobOutcome, LocalJobRunner

_PATTERNS: Final = {ResourceCondition.WaitForTaskToken, ResourceCondition.Sync}
_SYNC_ACTIONS: Final = {"createtrainingjob", "createhyperparametertuningjob"}
_RUNNER: list[LocalJobRunner] = []  # the emulator's one runner (install() sets it)


def runner() -> LocalJobRunner:
    if not _RUNNER:
        raise RuntimeError("no local job runner installed (local.emulator.sagemaker_sync.install)")
    return _RUNNER[0]


def _backend(account: str, region: str) -> Any:
    return sagemaker_models.sagemaker_backends[account][region]


def throttled(operation: str) -> ClientError:
    """The error SageMaker answers when its API rate is exceeded."""
    return ClientError(
        {
            "Error": {"Code": "ThrottlingException", "Message": "Rate exceeded"},
            "ResponseMetadata": {"HTTPStatusCode": 400, "RequestId": "emulated-throttle"},
        },
        operation,
    )


# The errors botocore's SageMaker model declares (each a class of its own in the AWS Java SDK, whose class names
# are the error names Step Functions' optimized integration raises); any other error code (ValidationException,
# ThrottlingException, AccessDeniedException) reaches the service's base class, AmazonSageMakerException.
_MODELED_ERRORS: Final = frozenset(
    shape.name for shape in botocore.session.get_session().get_service_model("sagemaker").error_shapes
)


def api_error_name(code: str) -> str:
    """`SageMaker.<Java SDK exception class>`: ResourceLimitExceeded -> SageMaker.ResourceLimitExceededException,
    an unmodeled code -> SageMaker.AmazonSageMakerException."""
    if code in _MODELED_ERRORS:
        return f"SageMaker.{code if code.endswith('Exception') else code + 'Exception'}"
    return "SageMaker.AmazonSageMakerException"


_STATUS_MESSAGES: Final = {
    "Completed": "Training job completed",
    "Stopped": "Training job stopped",
    "MaxRuntimeExceeded": "Training job runtime exceeded MaxRuntimeInSeconds provided",
}


def record_outcome(job: Any, outcome: JobOutcome, metric_definitions: list) -> None:
    """Write what the runner saw into moto's job record, which otherwise says Completed at once."""
    secondary = outcome.secondary_status or outcome.status
    job.training_job_status = outcome.status
    job.secondary_status = secondary
    job.training_start_time, job.training_end_time = outcome.started, outcome.ended
    job.last_modified_time = outcome.ended
    job.final_metric_data_list = outcome.final_metric_data_list()
    job.algorithm_specification["MetricDefinitions"] = metric_definitions
    job.failure_reason = outcome.failure_reason
    job.model_artifacts = {"S3ModelArtifacts": outcome.model_artifacts} if outcome.model_artifacts else None
    job.secondary_status_transitions = [
        {
            "Status": "Starting",
            "StartTime": outcome.started,
            "EndTime": outcome.started,
            "StatusMessage": "Starting the training job (emulated: a local process)",
        },
        {
            "Status": secondary,
            "StartTime": outcome.ended,
            "StatusMessage": outcome.failure_reason or _STATUS_MESSAGES.get(secondary, secondary),
        },
    ]


def sync_task_failed(task: StateTaskServiceCallback, env, description: dict) -> FailureEventException:
    """`.sync` on a job that ended Failed: States.TaskFailed with the job's description as the cause."""
    return FailureEventException(
        FailureEvent(
            env=env,
            error_name=StatesErrorName(typ=StatesErrorNameType.StatesTaskFailed),
            event_type=HistoryEventType.TaskFailed,
            event_details=EventDetails(
                taskFailedEventDetails=TaskFailedEventDetails(
                    resource=task._get_sfn_resource(),
                    resourceType=task._get_sfn_resource_type(),
                    error=StatesErrorNameType.StatesTaskFailed.to_name(),
                    cause=to_json_str(description),
                )
            ),
        )
    )


class SageMakerTasks(StateTaskServiceCallback):
    """`arn:aws:states:::sagemaker:<action>[.sync]` states; `.sync` for training and tuning jobs."""

    def __init__(self) -> None:
        super().__init__(supported_integration_patterns=set(_PATTERNS))

    def _get_supported_parameters(self) -> set[str] | None:
        return set()  # every parameter is passed to the API as written

    def _from_error(self, env, ex: Exception) -> FailureEvent:
        if isinstance(ex, ClientError):
            code = ex.response["Error"]["Code"]
            name = api_error_name(code)
            meta = ex.response.get("ResponseMetadata", {})
            cause = (
                f"{ex.response['Error'].get('Message')} (Service: AmazonSageMaker; Status Code: "
                f"{meta.get('HTTPStatusCode', 400)}; Error Code: {code}; Request ID: {meta.get('RequestId')}; "
                "Proxy: null)"
            )
            return FailureEvent(
                env=env,
                error_name=CustomErrorName(name),
                event_type=HistoryEventType.TaskFailed,
                event_details=EventDetails(
                    taskFailedEventDetails=TaskFailedEventDetails(
                        error=name,
                        cause=cause,
                        resource=self._get_sfn_resource(),
                        resourceType=self._get_sfn_resource_type(),
                    )
                ),
            )
        return super()._from_error(env=env, ex=ex)

    def _eval_service_task(self, env, resource_runtime_part, normalised_parameters: dict, state_credentials):
        action = self._get_boto_service_action()
        name = normalised_parameters.get("TrainingJobName") or normalised_parameters.get(
            "HyperParameterTuningJobName", ""
        )
        if action == "create_training_job" and runner().faults.hit("create", name) == "throttle":
            raise throttled("CreateTrainingJob")
        client = boto_client.boto_client_for(  # the state machine's role where IAM is enforced
            region=resource_runtime_part.region, service="sagemaker", state_credentials=state_credentials
        )
        response = getattr(client, action)(**normalised_parameters)
        response.pop("ResponseMetadata", None)
        if action == "create_training_job":
            self._job(resource_runtime_part, name).training_job_status = "InProgress"
        env.stack.append(response)

    @staticmethod
    def _job(part, name: str) -> Any:
        return _backend(part.account, part.region).training_jobs[name]

    def _build_sync_resolver(
        self, env, resource_runtime_part, normalised_parameters: dict, state_credentials
    ) -> Callable[[], Any] | None:
        env.stack.pop()  # the Create* answer; the task's result is the job's description
        action = self.resource.api_action.lower()
        if action not in _SYNC_ACTIONS:
            return super()._build_sync_resolver(env, resource_runtime_part, normalised_parameters, state_credentials)
        run = _run_training_job if action == "createtrainingjob" else _run_tuning_job

        def resolve() -> dict:
            description, failed = run(resource_runtime_part, normalised_parameters, lambda: not env.is_running())
            description = json.loads(to_json_str(description))
            if failed:
                raise sync_task_failed(self, env, description)
            return description

        return resolve


def _run_training_job(part, request: dict, cancelled: Callable[[], bool]) -> tuple[dict, bool]:
    backend = _backend(part.account, part.region)
    job = backend.training_jobs[request["TrainingJobName"]]
    definitions = list(request.get("AlgorithmSpecification", {}).get("MetricDefinitions") or [])
    outcome = runner().run(request, job_arn=job.arn, cancelled=cancelled)
    record_outcome(job, outcome, definitions)
    return backend.describe_training_job(request["TrainingJobName"]), outcome.status == "Failed"


def _register_trial(backend: Any, trial: tuning.Trial, tuning_arn: str) -> Any:
    """The trial as moto's training job record (so DescribeTrainingJob answers for it)."""
    r = trial.request
    job = backend.create_training_job(
        training_job_name=trial.name,
        hyper_parameters=r.get("HyperParameters", {}),
        algorithm_specification=dict(r.get("AlgorithmSpecification", {})),
        role_arn=r.get("RoleArn"),
        input_data_config=r.get("InputDataConfig", []),
        output_data_config=r.get("OutputDataConfig", {}),
        resource_config=r.get("ResourceConfig", {}),
        vpc_config=r.get("VpcConfig"),
        stopping_condition=r.get("StoppingCondition", {}),
        tags=r.get("Tags"),
        enable_network_isolation=r.get("EnableNetworkIsolation", False),
        enable_inter_container_traffic_encryption=r.get("EnableInterContainerTrafficEncryption", False),
        enable_managed_spot_training=r.get("EnableManagedSpotTraining", False),
        checkpoint_config=r.get("CheckpointConfig"),
        debug_hook_config=None,
        debug_rule_configurations=None,
        tensor_board_output_config=None,
        experiment_config=None,
    )
    job.training_job_status = "InProgress"
    job.tuning_job_arn = tuning_arn
    return job


def _run_tuning_job(part, request: dict, cancelled: Callable[[], bool]) -> tuple[dict, bool]:
    backend = _backend(part.account, part.region)
    tuning_job = backend.hyper_parameter_tuning_jobs[request["HyperParameterTuningJobName"]]
    planned = tuning.plan(request, max_trials=runner().max_trials)
    tuning_job.local_trials = planned.trials
    tuning_job.hyper_parameter_tuning_job_status = "InProgress"
    definitions = list(
        request["TrainingJobDefinition"].get("AlgorithmSpecification", {}).get("MetricDefinitions") or []
    )
    for trial in planned.trials:
        job = _register_trial(backend, trial, tuning_job.arn)
        runner().say(f"    trial {trial.name}: {trial.tuned}")
        if cancelled():  # the execution was stopped: the trials not yet run never start
            for left in planned.trials[planned.trials.index(trial) :]:
                left.status = "Stopped"
            break
        outcome = runner().run(trial.request, job_arn=job.arn, cancelled=cancelled)
        record_outcome(job, outcome, definitions)
        trial.status, trial.failure_reason, trial.outcome = outcome.status, outcome.failure_reason, outcome
        trial.objective = outcome.metrics.get(planned.objective_metric) if outcome.status == "Completed" else None
    _record_tuning(tuning_job, planned)
    description = backend.describe_hyper_parameter_tuning_job(request["HyperParameterTuningJobName"])
    return description, tuning_job.hyper_parameter_tuning_job_status != "Completed"


def trial_summary(trial: tuning.Trial, tuning_job: Any, objective_type: str, metric: str) -> dict[str, Any]:
    """A HyperParameterTrainingJobSummary, as ListTrainingJobsForHyperParameterTuningJob gives it."""
    outcome = trial.outcome
    summary: dict[str, Any] = {
        "TrainingJobName": trial.name,
        "TrainingJobArn": sagemaker_models.FakeTrainingJob.arn_formatter(
            trial.name, tuning_job.account_id, tuning_job.region_name
        ),
        "TuningJobName": tuning_job.hyper_parameter_tuning_job_name,
        "CreationTime": outcome.started if outcome else datetime.now(UTC),
        "TrainingJobStatus": trial.status,
        "TunedHyperParameters": dict(trial.tuned),
        "ObjectiveStatus": "Succeeded" if trial.objective is not None else "Failed",
    }
    if outcome:
        summary.update(TrainingStartTime=outcome.started, TrainingEndTime=outcome.ended)
    if trial.failure_reason:
        summary["FailureReason"] = trial.failure_reason
    if trial.objective is not None:
        summary["FinalHyperParameterTuningJobObjectiveMetric"] = {
            "Type": objective_type,
            "MetricName": metric,
            "Value": trial.objective,
        }
    return summary


def _record_tuning(tuning_job: Any, planned: tuning.TuningPlan) -> None:
    trials = planned.trials
    tuning_job.local_summaries = [
        trial_summary(t, tuning_job, planned.objective_type, planned.objective_metric) for t in trials
    ]
    completed = sum(t.status == "Completed" for t in trials)
    stopped = sum(t.status == "Stopped" for t in trials)
    tuning_job.training_job_status_counters = {
        "Completed": completed,
        "InProgress": 0,
        "RetryableError": 0,
        "NonRetryableError": len(trials) - completed - stopped,
        "Stopped": stopped,
    }
    scored = sum(t.objective is not None for t in trials)
    tuning_job.objective_status_counters = {"Succeeded": scored, "Pending": 0, "Failed": len(trials) - scored}
    top = tuning.best(trials, planned.objective_type)
    tuning_job.best_training_job = next(
        (s for s in tuning_job.local_summaries if top and s["TrainingJobName"] == top.name), None
    )
    tuning_job.OverallBestTrainingJob = tuning_job.best_training_job
    tuning_job.hyper_parameter_tuning_job_status = "Completed" if top else "Failed"
    tuning_job.failure_reason = "" if top else "All training jobs failed or reported no objective metric"
    tuning_job.hyper_parameter_tuning_end_time = tuning_job.last_modified_time = datetime.now(UTC)
    tuning_job.tuning_job_completion_details = {"NumberOfTrainingJobsObjectiveNotImproving": 0}
    tuning_job.consumed_resources = {
        "RuntimeInSeconds": int(sum((t.outcome.ended - t.outcome.started).total_seconds() for t in trials if t.outcome))
    }


def list_trials_response(self) -> Any:
    """ListTrainingJobsForHyperParameterTuningJob, which moto 5.2 lacks: the trials the runner recorded."""
    from moto.core.responses import ActionResult
    from moto.sagemaker.exceptions import ValidationError

    name = self._get_param("HyperParameterTuningJobName")
    jobs = self.sagemaker_backend.hyper_parameter_tuning_jobs
    if name not in jobs:
        raise ValidationError(message=f"Amazon SageMaker can't find a tuning job with name {name}")
    summaries = list(getattr(jobs[name], "local_summaries", []))
    start = int(self._get_param("NextToken") or 0)
    size = int(self._get_param("MaxResults") or 10)
    page = summaries[start : start + size]
    result: dict[str, Any] = {"TrainingJobSummaries": page}
    if start + size < len(summaries):
        result["NextToken"] = str(start + size)
    return ActionResult(result)


_ORIGINAL: list = []  # moto's own factory, restored by uninstall()


def install(job_runner: LocalJobRunner) -> None:
    """Register the integration and the listing API; `job_runner` runs the jobs until uninstall()."""
    _RUNNER[:] = [job_runner]
    if not _ORIGINAL:
        _ORIGINAL.append(state_task_service_factory.state_task_service_for)
    original = _ORIGINAL[0]

    def state_task_service_for(service_name: str):
        return SageMakerTasks() if service_name == "sagemaker" else original(service_name)

    state_task_service_factory.state_task_service_for = state_task_service_for
    state_task_factory.state_task_service_for = state_task_service_for
    from moto.sagemaker.responses import SageMakerResponse

    SageMakerResponse.list_training_jobs_for_hyper_parameter_tuning_job = list_trials_response


def uninstall() -> None:
    """moto as it ships again (an emulator outside LocalAws.start, e.g. mock_aws, stops at `.sync`)."""
    _RUNNER.clear()
    if _ORIGINAL:
        state_task_service_factory.state_task_service_for = _ORIGINAL[0]
        state_task_factory.state_task_service_for = _ORIGINAL[0]
