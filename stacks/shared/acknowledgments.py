"""Accepted scanner findings, stated where the resource is made (cdk-nag and the Control Tower cfn-guard rules).

`acknowledge(construct, rule, reason)` records a rule with a fixed id on the construct (aws-cdk's
Validations.acknowledge, which cdk-nag reads on the resource and its parents). A wildcard resource a policy
grants on purpose is a `Wildcard`: its finding id (`AwsSolutions-IAM5[Resource::<resource>]`) holds the resource
as cdk-nag prints it, with the logical ids, exports and pseudo parameters of the synthesized template, so it is
rendered at synth from the statement's own tokens (`acknowledge_wildcards`), never written out in source. A
wildcard the policy does not grant fails the synth, so an acknowledgment cannot outlive what it acknowledges.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import jsii
from aws_cdk import Acknowledgment, Annotations, CfnResource, Stack, Validations
from aws_cdk import aws_iam as iam
from constructs import IConstruct, IValidation

WILDCARD_RULE = "AwsSolutions-IAM5"
# AWS requires Resource '*' for these: the reason every role's `*` statement shares, with its actions after it.
AWS_REQUIRES_STAR = "These actions have no resource-level permissions, so AWS requires Resource '*'"
CFN_GUARD = "cdk-validator-cfnguard::"  # how the Control Tower (cfn-guard) plugin prefixes its rule names
IMPORTED_KEY = (
    "KmsKeyId is the data key's ARN, imported from the Data stack (Fn::ImportValue); the rule only "
    "accepts a literal string or a Ref/GetAtt to a key in the same template, so it cannot read it."
)
ENI_REASON = (
    "SageMaker creates the job's/model's network interfaces in the role's name; their ids do not exist "
    "before. Creation also requires the placement's subnets and security groups, named in the same "
    "statement; permission and delete calls are limited to interfaces in those subnets (ec2:Subnet)."
)


def acknowledge(construct: IConstruct, rule: str, reason: str) -> None:
    """`rule` (e.g. `AwsSolutions-S1`, `cdk-validator-cfnguard::<rule>`) is accepted on `construct`: `reason`."""
    Validations.of(construct).acknowledge(Acknowledgment(id=rule, reason=reason))


@dataclass(frozen=True)
class Wildcard:
    """A wildcard resource a policy grants on purpose (as the statement writes it, tokens and all), and why."""

    resource: str
    reason: str


def flatten(value: Any) -> str:
    """A resolved resource as cdk-nag prints it in a finding id (cdk-nag's utils/flatten-cfn-reference)."""
    if isinstance(value, str):
        return value.replace("${", "<").replace("}", ">")
    if isinstance(value, dict) and "Fn::Join" in value:
        delimiter, items = value["Fn::Join"]
        return delimiter.join(flatten(item) for item in items)
    if isinstance(value, dict) and "Fn::Sub" in value:
        return flatten(value["Fn::Sub"])
    if isinstance(value, dict) and "Fn::GetAtt" in value:
        resource, attribute = value["Fn::GetAtt"]
        return f"<{flatten(resource)}.{flatten(attribute)}>"
    if isinstance(value, dict) and "Fn::ImportValue" in value:
        return flatten(value["Fn::ImportValue"])
    if isinstance(value, dict) and "Ref" in value:
        return f"<{flatten(value['Ref'])}>"
    return json.dumps(value, separators=(",", ":"))


def _granted(stack: Stack, policy: iam.CfnManagedPolicy) -> set[str]:
    """Every resource the policy's Allow statements name, flattened."""
    found = set()
    for statement in stack.resolve(policy.policy_document).get("Statement", []):
        if statement.get("Effect") == "Allow":
            resources = statement.get("Resource", [])
            found |= {flatten(r) for r in (resources if isinstance(resources, list) else [resources])}
    return found


@jsii.implements(IValidation)
class _WildcardAcknowledgments:
    """Runs at synth after the references between stacks resolve, before the rule packs read the tree."""

    def __init__(self, policy: iam.CfnManagedPolicy, wildcards: tuple[Wildcard, ...]) -> None:
        self._policy, self._wildcards = policy, wildcards

    def validate(self) -> list[str]:
        stack = Stack.of(self._policy)
        granted = _granted(stack, self._policy)
        errors = []
        for wildcard in self._wildcards:
            resource = flatten(stack.resolve(wildcard.resource))
            if resource not in granted:
                errors.append(f"acknowledged wildcard {resource} is not granted by {self._policy.node.path}")
                continue
            _acknowledge_without_trace(self._policy, f"{WILDCARD_RULE}[Resource::{resource}]", wildcard.reason)
        return errors


ACKNOWLEDGED_RULES = "aws:cdk:acknowledged-rules"  # the metadata Validations.acknowledge records and cdk-nag reads
ANNOTATION_NAMESPACE = "Annotation::"  # how aws-cdk qualifies a rule id that is not a plugin's own


def _acknowledge_without_trace(construct: IConstruct, rule: str, reason: str) -> None:
    """What Validations.acknowledge does for a cdk-nag rule, without its stack trace: called while the tree
    validates, the trace would name the jsii kernel's temporary folder, and the metadata would differ per synth."""
    qualified = ANNOTATION_NAMESPACE + rule
    construct.node.add_metadata(ACKNOWLEDGED_RULES, {qualified: reason})
    Annotations.of(construct).acknowledge_warning(qualified)
    Annotations.of(construct).acknowledge_warning(rule)


def acknowledge_wildcards(policy: iam.ManagedPolicy | CfnResource, wildcards: Iterable[Wildcard]) -> None:
    """Accept each wildcard on `policy` (its CloudFormation resource), once the tokens resolve at synth."""
    resource = policy.node.default_child if isinstance(policy, iam.ManagedPolicy) else policy
    unique = tuple({w.resource: w for w in wildcards}.values())
    if unique:
        resource.node.add_validation(_WildcardAcknowledgments(resource, unique))
