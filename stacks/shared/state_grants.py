"""What a state machine's role must allow, collected from the states its definition reaches.

aws-cdk's StateMachine does the same with each task's `taskPolicies` (StateGraph.policyStatements); the tasks here
are raw ASL (SageMakerJobStep) or scoped more narrowly than CDK scopes them, so each part of a workflow that calls
a service owns its statements (`state_machine_grants`), and nothing keeps a list of steps by hand: a state the
definition cannot reach grants nothing, a new one is granted by being reachable.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from aws_cdk import Stack
from aws_cdk import aws_iam as iam
from aws_cdk import aws_stepfunctions as sfn
from constructs import IConstruct

from .acknowledgments import Wildcard
from .sagemaker_job_step import SageMakerJobStep, job_step_statements, job_step_wildcards


@dataclass(frozen=True)
class StateGrants:
    """A part's statements for its state machine's role, and why those reaching a wildcard do (cdk-nag's IAM5)."""

    statements: Sequence[iam.PolicyStatement]
    wildcards: Sequence[Wildcard] = ()


@runtime_checkable
class GrantsOwner(Protocol):
    """A construct whose states call services: it says what its state machine must allow for them."""

    def state_machine_grants(self) -> StateGrants: ...


def _owner(state: sfn.State) -> IConstruct | None:
    """The nearest construct at or above `state` that owns its grants (a job step, or a GrantsOwner)."""
    for construct in reversed(state.node.scopes):
        if isinstance(construct, SageMakerJobStep | GrantsOwner):
            return construct
    return None


def definition_grants(start: sfn.IChainable) -> StateGrants:
    """The job steps' statements (one set for all of them), then each other owner's, in the order the states
    are reached from `start` (error handlers included). Renders the roles of the job steps it finds."""
    owners: dict[str, IConstruct] = {}
    for state in sfn.State.find_reachable_states(start.start_state, include_error_handlers=True):
        owner = _owner(state)
        if owner is not None:
            owners.setdefault(owner.node.path, owner)
    steps = [o for o in owners.values() if isinstance(o, SageMakerJobStep)]
    others = [o.state_machine_grants() for o in owners.values() if not isinstance(o, SageMakerJobStep)]
    for step in steps:
        step.role.finish()
    stack = Stack.of(start.start_state)
    return StateGrants(
        statements=[
            *(job_step_statements(stack, steps) if steps else []),
            *(s for grants in others for s in grants.statements),
        ],
        wildcards=[*job_step_wildcards(stack, steps), *(w for grants in others for w in grants.wildcards)],
    )
