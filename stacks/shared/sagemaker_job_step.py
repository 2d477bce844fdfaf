"""SageMakerJobStep: one SageMaker job state of a workflow, everything about it in one place.

A step renders its request as the `.sync` task's Parameters, keeps what the next states read of the job's
description (ResultSelector at its `JobOutput`), retries SageMaker API errors, sends any other failure to the
workflow's Notify, checks the job ended Completed, and owns both sides of the job's access: its execution role
is extended with what the request reads and writes (or refused, where the role is fixed), and its state machine
is allowed what `job_step_statements` lists. aws-cdk's SageMakerCreateTrainingJob task does the same for one
job, but cannot set OutputDataConfig.CompressionType or a ContainerEntrypoint, and there is no task for tuning
jobs.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from aws_cdk import Duration, Stack
from aws_cdk import aws_iam as iam
from aws_cdk import aws_stepfunctions as sfn
from constructs import Construct

from .acknowledgments import Wildcard
from .job_access import JobAccess
from .job_role import SageMakerJobRole

# Raised by the Create*/Describe* calls themselves: worth retrying with backoff.
API_RETRY_ERRORS = (
    "SageMaker.AmazonSageMakerException",
    "SageMaker.ThrottlingException",
    "SageMaker.ResourceLimitExceededException",
    "ThrottlingException",
)
NOT_COMPLETED = "JobNotCompleted"


class JobRequest(Protocol):
    """What a step sends: `to_asl()` is the task's Parameters; the role it passes to SageMaker (None: the step
    makes one), the data key, what the job reads and writes (`access`)."""

    @property
    def role_arn(self) -> str | None: ...

    @property
    def kms_key_arn(self) -> str: ...

    @property
    def access(self) -> JobAccess: ...

    def with_role(self, role_arn: str) -> JobRequest: ...

    def to_asl(self) -> dict[str, Any]: ...


@dataclass(frozen=True)
class JobOutput:
    """Where a step's result lands in the execution state (`$.training`), and the fields it keeps there."""

    path: str

    def __post_init__(self) -> None:
        if not self.path.startswith("$."):
            raise ValueError(f"a result path is a JSONPath under $: {self.path!r}")

    def field(self, name: str) -> str:
        return f"{self.path}.{name}"

    @property
    def job_name(self) -> str:
        return self.field("job_name")

    @property
    def model_s3_uri(self) -> str:
        return self.field("model_s3_uri")


def _not_completed(scope: Construct, construct_id: str, cause: str, notify: sfn.IChainable) -> sfn.Pass:
    state = sfn.Pass(
        scope,
        f"{construct_id.removesuffix('Completed')}NotCompleted",
        parameters={"Error": NOT_COMPLETED, "Cause.$": cause},
        result_path="$.error",
    )
    state.next(notify)
    return state


def _training_job_completed(scope: Construct, construct_id: str, output: JobOutput, notify: sfn.IChainable):
    """SageMaker ends a job past MaxRuntimeInSeconds as Stopped / MaxRuntimeExceeded, which `.sync` may return as
    a result; that and any status but Completed go to `<id>NotCompleted` (status and reason) -> Notify."""
    path = output.path
    cause = (
        f"States.Format('training job {{}} ended {{}} ({{}}), not Completed: nothing recorded', "
        f"{path}.job_name, {path}.status, {path}.secondary_status)"
    )
    return (
        sfn.Choice(scope, construct_id).otherwise(_not_completed(scope, construct_id, cause, notify)),
        sfn.Condition.string_equals(f"{path}.status", "Completed"),
    )


def _tuning_job_completed(scope: Construct, construct_id: str, output: JobOutput, notify: sfn.IChainable):
    """Completed with at least one trial scored, so it has a BestTrainingJob that completed."""
    path = output.path
    cause = (
        f"States.Format('tuning job {{}} ended {{}} with objective status counters {{}}, no completed "
        f"best training job: nothing recorded', {path}.name, {path}.status, "
        f"States.JsonToString({path}.objectives))"
    )
    scored = f"{path}.objectives.Succeeded"
    completed = sfn.Condition.and_(
        sfn.Condition.string_equals(f"{path}.status", "Completed"),
        sfn.Condition.is_present(scored),
        sfn.Condition.number_greater_than_equals(scored, 1),
    )
    return sfn.Choice(scope, construct_id).otherwise(_not_completed(scope, construct_id, cause, notify)), completed


@dataclass(frozen=True)
class SageMakerJobKind:
    """One `.sync` SageMaker integration: its API, the IAM resource type and actions aws-cdk's task grants for it
    (ListTags there on `*`, here on this environment's jobs), the Step Functions-managed rule it waits through,
    and what its description says about the job (kept for the completed check)."""

    api: str
    resource_type: str
    actions: tuple[str, ...]
    sync_rule: str
    sid: str
    name: Mapping[str, str]
    outcome: Mapping[str, str]
    completed: Callable[..., tuple[sfn.Choice, sfn.Condition]]

    def resource(self, stack: Stack) -> str:
        return f"arn:{stack.partition}:states:::sagemaker:{self.api}.sync"


TRAINING_JOB = SageMakerJobKind(
    api="createTrainingJob",
    resource_type="training-job",
    actions=(
        "sagemaker:CreateTrainingJob",
        "sagemaker:DescribeTrainingJob",
        "sagemaker:StopTrainingJob",
        "sagemaker:ListTags",
        "sagemaker:AddTags",
    ),
    sync_rule="StepFunctionsGetEventsForSageMakerTrainingJobsRule",
    sid="OwnTrainingJobs",
    name={"job_name.$": "$.TrainingJobName"},
    # Both are required members of DescribeTrainingJob's answer (a missing ResultSelector path, such as
    # FailureReason on a completed job, fails the execution with States.Runtime, which no Catch sees). A job that
    # ends Failed never gets here: `.sync` raises States.TaskFailed with the whole description as Cause.
    outcome={"status.$": "$.TrainingJobStatus", "secondary_status.$": "$.SecondaryStatus"},
    completed=_training_job_completed,
)
TUNING_JOB = SageMakerJobKind(
    api="createHyperParameterTuningJob",
    resource_type="hyper-parameter-tuning-job",
    actions=(
        "sagemaker:CreateHyperParameterTuningJob",
        "sagemaker:DescribeHyperParameterTuningJob",
        "sagemaker:StopHyperParameterTuningJob",
        "sagemaker:ListTags",
        "sagemaker:AddTags",
    ),
    sync_rule="StepFunctionsGetEventsForSageMakerTuningJobsRule",
    sid="OwnTuningJobs",
    name={"name.$": "$.HyperParameterTuningJobName"},
    # ObjectiveStatusCounters is required; Succeeded counts the trials scored, the BestTrainingJob candidates.
    outcome={"status.$": "$.HyperParameterTuningJobStatus", "objectives.$": "$.ObjectiveStatusCounters"},
    completed=_tuning_job_completed,
)


@dataclass(frozen=True)
class JobVariant:
    """Another request for the same job, run instead when `when` holds (e.g. a channel list ending with `eval`);
    its task is the state `state`, and the step starts with a Choice between the two."""

    state: str
    when: sfn.Condition
    request: JobRequest


@dataclass(frozen=True)
class JobCatch:
    """A failure handled before the step's own catch-all to Notify (e.g. a capacity error retried later)."""

    errors: tuple[str, ...]
    handler: sfn.IChainable


def job_arn(stack: Stack, resource_type: str, prefix: str) -> str:
    """`arn:...:sagemaker:<region>:<account>:<resource>/<prefix>-*`: the IAM scope of one environment's jobs."""
    return stack.format_arn(service="sagemaker", resource=resource_type, resource_name=f"{prefix}-*")


class SageMakerJobStep(Construct):
    """A `.sync` job task (the state named as the construct), its API retries, its catches (`catch`, then any
    error to `notify`) and the `Completed` check named `completed_check`; `then(next_state)` continues a job that
    completed. With `variant`, `start` is the Choice `chooser` between the two tasks, which share the check.

    The role: the SageMakerJobRole whose ARN the request names, extended with the request's access (a fixed one
    refuses the step instead), or, for a request without a role, one made from the request (`Role`)."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        kind: SageMakerJobKind,
        request: JobRequest,
        output: JobOutput,
        name_prefix: str,
        notify: sfn.IChainable,
        completed_check: str,
        identity: Mapping[str, str] | None = None,
        values: Mapping[str, str] | None = None,
        variant: JobVariant | None = None,
        chooser: str | None = None,
        catch: Sequence[JobCatch] = (),
    ) -> None:
        """`identity`/`values`: selector fields kept before/after the job's outcome (`{"job_arn.$": ...}`);
        `name_prefix`: every job name the request renders starts with `<name_prefix>-` (the IAM scope)."""
        super().__init__(scope, construct_id)
        self.kind, self.output, self.name_prefix = kind, output, name_prefix
        if (variant is None) != (chooser is None):
            raise ValueError(f"{construct_id}: a variant needs a chooser state, and a chooser a variant")
        requests = {construct_id: request, **({variant.state: variant.request} if variant else {})}
        self.role = self._role(request, name_prefix)
        for each in requests.values():
            if each.role_arn not in (None, request.role_arn):
                raise ValueError(f"{self.node.path}: a variant runs as the same role as its job")
            self.role.extend(self.node.path, each.access)
        self.requests = {name: each.with_role(self.role.role_arn) for name, each in requests.items()}
        selector = {**kind.name, **(identity or {}), **kind.outcome, **(values or {})}
        self.tasks = {
            name: self._task(name, each, selector, [*catch, JobCatch(("States.ALL",), notify)])
            for name, each in self.requests.items()
        }
        self._check, self._completed = kind.completed(self, completed_check, output, notify)
        for task in self.tasks.values():
            task.next(self._check)
        self.start: sfn.State = self.tasks[construct_id]
        if variant is not None:
            choice = sfn.Choice(self, chooser).when(variant.when, self.tasks[variant.state])
            self.start = choice.otherwise(self.tasks[construct_id])

    def _role(self, request: JobRequest, name_prefix: str) -> SageMakerJobRole:
        """The stack's SageMakerJobRole the request names, or a new one for a request that names none."""
        if request.role_arn is None:
            return SageMakerJobRole(
                self,
                "Role",
                job_name_prefix=name_prefix,
                description=f"SageMaker execution role of the {self.node.id} jobs",
                policy_description=f"{self.node.id} job: what its request reads, writes and runs",
            )
        for construct in Stack.of(self).node.find_all():
            if isinstance(construct, SageMakerJobRole) and construct.role_arn == request.role_arn:
                return construct
        raise ValueError(f"{self.node.path}: its request's role is no SageMakerJobRole of this stack")

    def then(self, next_state: sfn.IChainable) -> sfn.IChainable:
        """A job that ended Completed goes on to `next_state`; returns it, to chain on."""
        self._check.when(self._completed, next_state)
        return next_state

    def _task(
        self, name: str, request: JobRequest, selector: Mapping[str, str], catches: Sequence[JobCatch]
    ) -> sfn.CustomState:
        task = sfn.CustomState(
            self,
            name,
            state_json={
                "Type": "Task",
                "Resource": self.kind.resource(Stack.of(self)),
                "Parameters": request.to_asl(),
                "ResultSelector": dict(selector),
                "ResultPath": self.output.path,
            },
        )
        # Throttling and transient SageMaker API errors: 4 retries, 30 s doubling (at most 10 min), full jitter.
        task.add_retry(
            errors=list(API_RETRY_ERRORS),
            interval=Duration.seconds(30),
            max_attempts=4,
            backoff_rate=2,
            max_delay=Duration.minutes(10),
            jitter_strategy=sfn.JitterType.FULL,
        )
        for each in catches:
            task.add_catch(each.handler, errors=list(each.errors), result_path="$.error")
        return task


def job_step_wildcards(stack: Stack, steps: Sequence[SageMakerJobStep]) -> list[Wildcard]:
    """Why job_step_statements reach `<name_prefix>-*` of each job kind (cdk-nag's IAM5)."""
    scopes = {job_arn(stack, s.kind.resource_type, s.name_prefix): s.kind.resource_type for s in steps}
    return [
        Wildcard(
            arn,
            f"SageMaker {kind} names are generated per execution (a tuning job's trials by SageMaker); the state "
            "machine may create, describe, stop and tag only those whose names start with this environment's prefix.",
        )
        for arn, kind in scopes.items()
    ]


def _first_seen(values) -> list:
    return list(dict.fromkeys(values))


def job_step_statements(stack: Stack, steps: Sequence[SageMakerJobStep]) -> list[iam.PolicyStatement]:
    """What a state machine needs to run `steps`: aws-cdk's task grants for each job kind, on this environment's
    jobs only (`<name_prefix>-*`); pass only the steps' roles, to SageMaker; the sync rules; and the data key the
    requests name for volumes and output (CreateTrainingJob checks the caller may use it)."""
    kinds: dict[str, tuple[SageMakerJobKind, str]] = {}  # resource type -> (kind, name prefix), first seen first
    for step in steps:
        kind, prefix = kinds.setdefault(step.kind.resource_type, (step.kind, step.name_prefix))
        if prefix != step.name_prefix:
            raise ValueError(f"{step.node.path}: one job name prefix per job kind and state machine")
    requests = [request for step in steps for request in step.requests.values()]
    keys = _first_seen(r.kms_key_arn for r in requests)
    return [
        *(
            iam.PolicyStatement(
                sid=kind.sid, actions=list(kind.actions), resources=[job_arn(stack, kind.resource_type, prefix)]
            )
            for kind, prefix in kinds.values()
        ),
        iam.PolicyStatement(
            sid="PassJobRoles",
            actions=["iam:PassRole"],
            resources=_first_seen(r.role_arn for r in requests),
            conditions={"StringEquals": {"iam:PassedToService": "sagemaker.amazonaws.com"}},
        ),
        iam.PolicyStatement(
            sid="SyncRules",
            actions=["events:PutTargets", "events:PutRule", "events:DescribeRule"],
            resources=[
                stack.format_arn(service="events", resource="rule", resource_name=kind.sync_rule)
                for kind, _ in kinds.values()
            ],
        ),
        iam.PolicyStatement(
            sid="VolumeKeyGrant",  # CreateTrainingJob with VolumeKmsKeyId/KmsKeyId checks the caller's key use
            actions=["kms:CreateGrant"],
            resources=keys,
            conditions={"Bool": {"kms:GrantIsForAWSResource": "true"}},
        ),
        iam.PolicyStatement(sid="DescribeDataKey", actions=["kms:DescribeKey"], resources=keys),
    ]
