"""What every state machine of the platform shares: its notify/record/log/trace permissions, its failure path
(Notify -> Failed), its happy path in order and its logged, traced StateMachine resource, so the training and
pruning workflows cannot drift apart on them (their SageMaker jobs: sagemaker_job_step.py)."""

from __future__ import annotations

from collections.abc import Sequence
from itertools import pairwise
from typing import Protocol

from aws_cdk import Aws, Stack
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_logs as logs
from aws_cdk import aws_sns as sns
from aws_cdk import aws_ssm as ssm
from aws_cdk import aws_stepfunctions as sfn
from aws_cdk import aws_stepfunctions_tasks as tasks
from constructs import Construct

from .acknowledgments import AWS_REQUIRES_STAR, CFN_GUARD, IMPORTED_KEY, Wildcard, acknowledge, acknowledge_wildcards
from .state_grants import StateGrants, definition_grants

LOG_DELIVERY_AND_TRACING_ACTIONS = [
    "logs:CreateLogDelivery",
    "logs:DeleteLogDelivery",
    "logs:DescribeLogGroups",
    "logs:DescribeResourcePolicies",
    "logs:GetLogDelivery",
    "logs:ListLogDeliveries",
    "logs:PutResourcePolicy",
    "logs:UpdateLogDelivery",
    "xray:GetSamplingRules",
    "xray:GetSamplingTargets",
    "xray:PutTelemetryRecords",
    "xray:PutTraceSegments",
]


def shell_statements(
    *, topic: sns.ITopic, key: kms.IKey, model_parameter: ssm.IStringParameter
) -> list[iam.PolicyStatement]:
    """Publish failures to the (KMS-encrypted) topic, record the model in SSM, deliver logs and traces."""
    return [
        iam.PolicyStatement(sid="NotifyFailure", actions=["sns:Publish"], resources=[topic.topic_arn]),
        iam.PolicyStatement(
            sid="EncryptNotification",  # the topic, and the bucket objects a workflow reads or writes, use the data key
            actions=["kms:GenerateDataKey", "kms:Decrypt"],
            resources=[key.key_arn],
        ),
        iam.PolicyStatement(sid="RecordModel", actions=["ssm:PutParameter"], resources=[model_parameter.parameter_arn]),
        iam.PolicyStatement(
            sid="LogDeliveryAndTracing",  # vended-log delivery and X-Ray have no resource-level scoping
            actions=LOG_DELIVERY_AND_TRACING_ACTIONS,
            resources=["*"],
        ),
    ]


def logged_state_machine(
    scope: Construct,
    *,
    start: sfn.IChainable,
    purpose: str,
    comment: str,
    topic: sns.ITopic,
    key: kms.IKey,
    model_parameter: ssm.IStringParameter,
    log_retention_days: int,
    log_retention_setting: str,
) -> sfn.StateMachine:
    """The state machine (`purpose`, e.g. "QLoRA training") with its KMS-encrypted log group (ALL, with
    execution data), X-Ray tracing, and a role whose every permission sits in one customer-managed policy
    (what the states reachable from `start` need, state_grants.py, + the shell's), created before the state
    machine; `log_retention_setting`: the config field of `log_retention_days`."""
    log_group = _execution_log(scope, key=key, days=log_retention_days, setting=log_retention_setting)
    # A customer-managed policy instead of CDK's inline default policy: every permission is listed here.
    role = iam.Role(
        scope,
        "Role",
        assumed_by=iam.ServicePrincipal(
            "states.amazonaws.com", conditions={"StringEquals": {"aws:SourceAccount": Aws.ACCOUNT_ID}}
        ),
        description=f"Step Functions role of the {purpose} state machine",
    )
    shell = shell_statements(topic=topic, key=key, model_parameter=model_parameter)
    grants = definition_grants(start)
    policy = iam.ManagedPolicy(
        scope,
        "Policy",
        description=f"{purpose} state machine: its SageMaker jobs, the failure topic, the model parameter",
        roles=[role],
        statements=[*_not_in(grants.statements, shell), *shell],
    )
    logs_and_traces = Wildcard(
        "*", f"{AWS_REQUIRES_STAR} (CloudWatch Logs vended-log delivery and X-Ray tracing of the state machine)."
    )
    acknowledge_wildcards(policy, [logs_and_traces, *grants.wildcards])
    state_machine = sfn.StateMachine(
        scope,
        "StateMachine",
        definition_body=sfn.DefinitionBody.from_chainable(start),
        role=role.without_policy_updates(),
        logs=sfn.LogOptions(destination=log_group, level=sfn.LogLevel.ALL, include_execution_data=True),
        tracing_enabled=True,
        comment=comment,
    )
    # Step Functions checks log delivery permissions on create: the policy must be attached first. Written
    # as an override because CDK would also list the role, which RoleArn already implies (cfn-lint W3005).
    state_machine.node.default_child.add_override(
        "DependsOn", [Stack.of(scope).get_logical_id(policy.node.default_child)]
    )
    return state_machine


def _execution_log(scope: Construct, *, key: kms.IKey, days: int, setting: str) -> logs.LogGroup:
    """The state machine's log group, under the data key and kept `days` (the config field `setting`): the
    execution data it records names buckets, jobs and models, so it is encrypted like them."""
    log_group = logs.LogGroup(scope, "Logs")
    cfn_log_group = log_group.node.default_child
    cfn_log_group.retention_in_days = days  # validated against the allowed values in config
    # The data key's policy (DataStack) lets CloudWatch Logs use it for this account's log groups.
    cfn_log_group.kms_key_id = key.key_arn
    acknowledge(log_group, f"{CFN_GUARD}cloudwatch_log_group_encrypted_check", IMPORTED_KEY)
    acknowledge(
        log_group,
        f"{CFN_GUARD}cloudwatch_log_group_retention_period_check",
        f"Where {setting} is under 365 days (dev: 30) the state machine's execution log is kept "
        "that long on purpose: a development environment's run history, not an audit record.",
    )
    return log_group


def _not_in(
    statements: Sequence[iam.PolicyStatement], shell: Sequence[iam.PolicyStatement]
) -> list[iam.PolicyStatement]:
    """The collected statements the shell does not already hold (the shell records the machine's own model
    parameter, which its RecordModel state grants too): a Sid appears once in a policy."""
    held = {s.sid for s in shell}
    return [s for s in statements if s.sid not in held]


class RecordModelTask(tasks.CallAwsService):
    """A CallAwsService ssm:PutParameter state that owns its grant (a Sid named as the state)."""

    def __init__(self, scope: Construct, construct_id: str, *, parameter: ssm.IStringParameter, **kwargs) -> None:
        super().__init__(scope, construct_id, **kwargs)
        self._parameter_arn = parameter.parameter_arn

    def state_machine_grants(self) -> StateGrants:
        return StateGrants(
            [iam.PolicyStatement(sid=self.node.id, actions=["ssm:PutParameter"], resources=[self._parameter_arn])]
        )


def record_model_task(
    scope: Construct,
    *,
    model_parameter: ssm.IStringParameter,
    value_path: str,
    notify: sfn.IChainable,
    construct_id: str = "RecordModel",
) -> tasks.CallAwsService:
    """`RecordModel`: write the S3 URI at `value_path` to the environment's model parameter; failures notify."""
    record = RecordModelTask(
        scope,
        construct_id,
        parameter=model_parameter,
        service="ssm",
        action="putParameter",
        parameters={
            "Name": model_parameter.parameter_name,
            "Value": sfn.JsonPath.string_at(value_path),
            "Type": "String",
            "Overwrite": True,
        },
        iam_resources=[model_parameter.parameter_arn],  # listed in the state machine's policy
        result_path=sfn.JsonPath.DISCARD,
    )
    record.add_catch(notify, errors=["States.ALL"], result_path="$.error")
    return record


def failure_path(
    scope: Construct, *, topic: sns.ITopic, subject: str, invalid_input_cause: str
) -> tuple[sfn.Pass, tasks.SnsPublish]:
    """(`InvalidInput`, `Notify`): `InvalidInput` sets the error for a rejected execution input and goes to
    `Notify` (execution id, error and input to the topic) -> `Failed` (the error's Error/Cause). A caught
    `States.*` error (a failed job is `States.TaskFailed`) ends in `StepFailed` instead, its name in the
    Cause: `States.` names are reserved, and a Fail state may not raise one (moto's interpreter refuses it
    at run time, which ended every job failure in `States.Runtime`)."""
    invalid = sfn.Pass(
        scope,
        "InvalidInput",
        parameters={"Error": "InvalidInput", "Cause": invalid_input_cause},
        result_path="$.error",
    )
    notify = tasks.SnsPublish(
        scope,
        "Notify",
        topic=topic,
        subject=subject,
        message=sfn.TaskInput.from_object(
            {
                "execution": sfn.JsonPath.execution_id,
                "error": sfn.JsonPath.object_at("$.error"),
                "input": sfn.JsonPath.object_at("$$.Execution.Input"),
            }
        ),
        result_path=sfn.JsonPath.DISCARD,
    )
    reserved = sfn.Fail(
        scope, "StepFailed", error="StepFailed", cause_path="States.Format('{}: {}', $.error.Error, $.error.Cause)"
    )
    failed = sfn.Fail(scope, "Failed", error_path="$.error.Error", cause_path="$.error.Cause")
    notify.next(
        sfn.Choice(scope, "ErrorName")
        .when(sfn.Condition.string_matches("$.error.Error", "States.*"), reserved)
        .otherwise(failed)
    )
    invalid.next(notify)
    return invalid, notify


class Step(Protocol):
    """A part of a workflow with more than one exit, e.g. a job and its completed check (SageMakerJobStep)."""

    @property
    def start(self) -> sfn.IChainable: ...

    def then(self, next_state: sfn.IChainable) -> sfn.IChainable: ...


def in_order(*parts: Step | sfn.INextable) -> None:
    """Each part goes on to the next one: the workflow's happy path, written in execution order."""
    for part, following in pairwise(parts):
        target = following.start if hasattr(following, "then") else following
        if hasattr(part, "then"):
            part.then(target)
        else:
            part.next(target)
