"""Drive a deployed workflow on the emulator: S3 events as EventBridge sees them, and an execution followed
state by state (what the Step Functions console shows, one line per state)."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

from .emulator import LocalAws


def s3_object_created_event(*, bucket: str, key: str, size: int, etag: str, account: str, region: str) -> dict:
    """The "Object Created" event S3 sends to EventBridge (the documented shape, one object)."""
    return {
        "version": "0",
        "id": "17793124-05d4-b198-2fde-7ededc63b103",
        "detail-type": "Object Created",
        "source": "aws.s3",
        "account": account,
        "time": "2026-12-01T00:00:00Z",
        "region": region,
        "resources": [f"arn:aws:s3:::{bucket}"],
        "detail": {
            "version": "0",
            "bucket": {"name": bucket},
            "object": {"key": key, "size": size, "etag": etag, "sequencer": "00617F08299329D189"},
            "request-id": "N4N7GDK58NMKJ12R",
            "requester": account,
            "source-ip-address": "203.0.113.15",
            "reason": "PutObject",
        },
    }


def rule_name(physical_id: str) -> str:
    """An AWS::Events::Rule's name from its CloudFormation physical id (`<bus>|<name>` or an ARN)."""
    return physical_id.rsplit("|", 1)[-1].rsplit("/", 1)[-1]


def rule_patterns(aws: LocalAws, stack_name: str) -> dict[str, str]:
    """Rule name -> EventPattern of every EventBridge rule the stack deployed."""
    events = aws.client("events")
    patterns = {}
    for resource in aws.resources(stack_name).values():
        if resource["ResourceType"] == "AWS::Events::Rule":
            name = rule_name(resource["PhysicalResourceId"])
            patterns[name] = events.describe_rule(Name=name)["EventPattern"]
    return patterns


def upload_and_match(
    aws: LocalAws, *, bucket: str, files: list[tuple[str, bytes]], patterns: dict[str, str], say: Callable[[str], None]
) -> list[str]:
    """Upload each (key, body) and check its event against each rule with EventBridge's TestEventPattern;
    returns the keys whose event matched a rule (the uploads that start an execution)."""
    s3, events = aws.client("s3"), aws.client("events")
    matched = []
    for key, body in files:
        put = s3.put_object(Bucket=bucket, Key=key, Body=body)
        event = s3_object_created_event(
            bucket=bucket, key=key, size=len(body), etag=put["ETag"].strip('"'), account=aws.account, region=aws.region
        )
        hits = [
            name
            for name, pattern in patterns.items()
            if events.test_event_pattern(EventPattern=pattern, Event=json.dumps(event))["Result"]
        ]
        say(f"  s3://{bucket}/{key} ({len(body)} B): {'matches ' + ', '.join(hits) if hits else 'no rule matches'}")
        matched += [key] if hits else []
    return matched


def executions(aws: LocalAws, machine_arn: str) -> list[dict]:
    return aws.client("stepfunctions").list_executions(stateMachineArn=machine_arn)["executions"]


def wait_for_executions(aws: LocalAws, machine_arn: str, count: int, timeout_s: float = 10.0) -> list[dict]:
    """The machine's executions once `count` exist (or at the timeout, however many there are)."""
    deadline = time.monotonic() + timeout_s
    while True:
        stop_if_denied(aws)  # EventBridge starts an execution with its target's role
        found = executions(aws, machine_arn)
        if len(found) >= count or time.monotonic() > deadline:
            return found
        time.sleep(0.2)


def _event_line(event: dict) -> str | None:
    kind = event["type"]
    if kind.endswith("StateEntered"):
        return f"-> {event['stateEnteredEventDetails']['name']}"
    if kind in ("TaskFailed", "ExecutionFailed"):
        details = event.get("taskFailedEventDetails") or event.get("executionFailedEventDetails") or {}
        return f"   {kind}: {details.get('error')}: {str(details.get('cause', ''))[:300]}"
    if kind == "TaskSubmitted":
        return f"   submitted {event['taskSubmittedEventDetails']['resource']}"
    return None


class Probe:
    """`make iam-mutation`'s run (`local.pipeline --iam-probe`): the first call IAM denies stops the run (exit 1,
    the denial's line), and it ends after the workflow's execution (exit 0): what follows runs as the operator."""

    on = False


PROBE = Probe()


def first_denial(aws: LocalAws) -> str | None:
    """`pipeline: AccessDenied: <AWS's message>` for the run's first denied call, or None."""
    denials = aws.iam.as_json()["denials"]
    return f"pipeline: AccessDenied: {denials[0]['message']}" if denials else None


def stop_if_denied(aws: LocalAws, execution_arn: str | None = None) -> None:
    """Under the probe, a denial ends the run (and stops `execution_arn`) naming the action and resource."""
    denial = first_denial(aws) if PROBE.on else None
    if denial:
        if execution_arn:
            aws.client("stepfunctions").stop_execution(executionArn=execution_arn, error="AccessDenied")
        raise SystemExit(denial)


def end_of_probe() -> None:
    if PROBE.on:
        raise SystemExit(0)


def follow(aws: LocalAws, execution_arn: str, *, say: Callable[[str], None], timeout_s: float = 1800) -> dict:
    """Print one line per state (and per failure) until the execution ends; returns DescribeExecution."""
    sfn = aws.client("stepfunctions")
    started, seen = time.monotonic(), 0
    while True:
        stop_if_denied(aws, execution_arn)
        described = sfn.describe_execution(executionArn=execution_arn)
        history = sfn.get_execution_history(executionArn=execution_arn, maxResults=1000)["events"]
        for event in history[seen:]:
            line = _event_line(event)
            if line:
                say(f"{time.monotonic() - started:7.1f}s {line}")
        seen = len(history)
        if described["status"] != "RUNNING":
            stop_if_denied(aws)  # a job or task that failed on a denial: the run names the denial
            return described
        if time.monotonic() - started > timeout_s:
            raise TimeoutError(f"{execution_arn} still RUNNING after {timeout_s:.0f}s")
        time.sleep(0.5)


def states_entered(aws: LocalAws, execution_arn: str) -> list[str]:
    history = aws.client("stepfunctions").get_execution_history(executionArn=execution_arn, maxResults=1000)
    return [e["stateEnteredEventDetails"]["name"] for e in history["events"] if e["type"].endswith("StateEntered")]


def output_of(described: dict) -> dict[str, Any]:
    return json.loads(described.get("output") or "{}")


def task_result(aws: LocalAws, execution_arn: str, state_name: str) -> dict[str, Any]:
    """The service's answer to the last call of the Task state `state_name` (its TaskSucceeded output, before
    ResultSelector), e.g. CreateModelPackage's ModelPackageArn for RegisterModel."""
    history = aws.client("stepfunctions").get_execution_history(executionArn=execution_arn, maxResults=1000)
    current, found = None, None
    for event in history["events"]:
        if event["type"].endswith("StateEntered"):
            current = event["stateEnteredEventDetails"]["name"]
        elif event["type"] == "TaskSucceeded" and current == state_name:
            found = json.loads(event["taskSucceededEventDetails"]["output"])
    if found is None:
        raise LookupError(f"{execution_arn}: no completed {state_name} call")
    return found
