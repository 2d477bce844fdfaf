"""The IAM record of a local run: every call an execution or state machine role made, the template statement
that allowed it (stack, logical id, statement index, the Action entry), and every denial.

The deployed policy a call was allowed by is traced back to the template through CloudFormation's own resource
list: a managed policy (AWS::IAM::ManagedPolicy) by its physical name, an inline policy by its role's physical
name and PolicyName. bench/iam_mutation.py reads this record to know which grants a run used.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from local.emulator import LocalAws


def policy_sources(aws: LocalAws) -> dict[tuple[str, str], dict[str, str]]:
    """(role name, policy name) -> {stack, logical_id, inline_in}: where each deployed role policy comes from."""
    cfn = aws.client("cloudformation")
    found: dict[tuple[str, str], dict[str, str]] = {}
    for stack in cfn.describe_stacks()["Stacks"]:
        name = stack["StackName"]
        template = cfn.get_template(StackName=name)["TemplateBody"]
        template = json.loads(template) if isinstance(template, str) else template
        resources = aws.resources(name)
        physical = {k: v.get("PhysicalResourceId", "") for k, v in resources.items()}
        roles = {
            k: physical.get(k, "") for k, r in template.get("Resources", {}).items() if r["Type"] == "AWS::IAM::Role"
        }
        for logical_id, resource in template.get("Resources", {}).items():
            properties = resource.get("Properties", {})
            if resource["Type"] == "AWS::IAM::Role":
                for inline in properties.get("Policies", []):
                    key = (roles[logical_id].rsplit("/", 1)[-1], inline["PolicyName"])
                    found[key] = {"stack": name, "logical_id": logical_id, "inline_policy": inline["PolicyName"]}
            elif resource["Type"] in ("AWS::IAM::ManagedPolicy", "AWS::IAM::Policy"):
                policy_name = physical.get(logical_id, "").rsplit("/", 1)[-1]
                for role in properties.get("Roles", []):
                    role_id = role.get("Ref") if isinstance(role, dict) else None
                    role_name = roles.get(role_id, role if isinstance(role, str) else "").rsplit("/", 1)[-1]
                    for candidate in (policy_name, properties.get("PolicyName", "")):
                        found[(role_name, candidate)] = {"stack": name, "logical_id": logical_id}
    return found


def write(aws: LocalAws, path: Path) -> dict[str, Any]:
    """The run's record, each allowed call with the template statement that allowed it, into `path`."""
    record = aws.iam.as_json()
    try:
        sources = policy_sources(aws)
    except Exception as err:  # noqa: BLE001 - a run that failed before its deploy has no stacks to trace to
        sources, record["untraced"] = {}, repr(err)
    for call in record["calls"]:
        call.update(sources.get((call["role"], call["policy"]), {}))
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(record, indent=2, default=str))
    return record


@contextmanager
def kept(aws: LocalAws, path: Path, say: Callable[[str], None]) -> Iterator[None]:
    """Write the record into `path` when the block ends, however it ends (a denied run's too)."""
    try:
        yield
    finally:
        record = write(aws, path)
        say(
            f"IAM (enforced): {len(record['calls'])} call(s) by the roles allowed, {len(record['denials'])} denied "
            f"({path} names the statement that allowed each)"
        )
