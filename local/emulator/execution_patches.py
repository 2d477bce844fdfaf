"""What moto 5.2 needs to run our workflows end to end from a deployed stack, patched narrowly and idempotently.

1. State machines created by CloudFormation go to the executing backend (moto keeps two: one that only
   stores definitions, used by its CloudFormation handler, and the ASL interpreter's, used by the API when
   `stepfunctions.execute_state_machine` is on).
2. AWS::S3::Bucket's `NotificationConfiguration.EventBridgeConfiguration` and `VersioningConfiguration` are
   applied (moto's CloudFormation handler drops both), so uploads reach EventBridge and keep versions as on AWS.
3. EventBridge rules deliver to Step Functions targets: the target's InputTransformer is applied and the
   execution started (moto delivers only to logs, SQS and event buses, and skips the transformer for S3 events).
   The transformer fills placeholders as the EventBridge user guide shows ("Input transform examples"): inside a
   JSON string the value as it is, outside one its JSON text (`"instance": <instance>` gives a quoted string;
   moto's parser pastes the bare text, which is not JSON); a path missing from the event gives null there, "" in
   a string (AWS documents only that the variable is not created).
4. An execution started without a name gets a UUID, as on AWS (moto names it `None`, so every unnamed
   execution of a machine would share one id, hence one job name).
5. `$$.Execution.StartTime` is the ISO 8601 string AWS gives (`2026-12-01T12:57:33.161Z`); moto hands the
   interpreter a datetime, which `States.StringSplit` (the pruning run's name) cannot take.
6. EventBridge's TestEventPattern answers (moto's is a stub that answers nothing) with the matcher moto's
   rules use, so a pattern is tested by the same code that routes the events.
7. Emulated time: Wait states and Retry intervals sleep `scale` times their length (the real lengths are
   recorded in `EmulatedClock.waits`), so a 600 s capacity back-off takes 0.6 s at scale 0.001.
8. An aws-sdk integration's answer is JSON as AWS's is: timestamps as ISO 8601 strings (moto's interpreter
   keeps boto3's datetimes, and the state after it fails "Object of type datetime is not JSON serializable",
   e.g. the registry's ListObjectVersions) and S3 GetObject's streaming Body as the object's text (the
   registry's ReadModelFacts parses it with States.StringToJson).
9. A definition is parsed once per process: moto's interpreter parses the ASL with ANTLR's pure-Python runtime
   on every create, update and execution (0.1-0.3 s for our workflows; about 25 CPU-seconds of a test run, as
   py-spy sampled it). The syntax tree is kept by definition text; each caller still gets components of its
   own, built from it, so no execution shares state with another.
"""

from __future__ import annotations

import functools
import json
import sys
import threading
import time
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime

from botocore.response import StreamingBody
from moto.events import models as events_models
from moto.s3 import models as s3_models
from moto.stepfunctions import models as sfn_models
from moto.stepfunctions.parser import models as parser_models
from moto.stepfunctions.parser.asl.component.common.retry import retrier_decl
from moto.stepfunctions.parser.asl.component.state.exec.state_task.service import state_task_service_aws_sdk
from moto.stepfunctions.parser.asl.component.state.wait.wait_function import wait_function
from moto.utilities.arns import parse_arn
from moto.utilities.utils import get_partition

from .moto_patches import patch_once


def executing_backend_for_cloudformation() -> None:
    sfn_models.stepfunctions_backends = parser_models.stepfunctions_parser_backends


def bucket_settings_from_cloudformation() -> None:
    def build(original):
        def create_from_cloudformation_json(klass, resource_name, cloudformation_json, account_id, region_name, **kw):
            bucket = original(klass, resource_name, cloudformation_json, account_id, region_name, **kw)
            properties = cloudformation_json.get("Properties", {})
            notification = properties.get("NotificationConfiguration") or {}
            if notification.get("EventBridgeConfiguration", {}).get("EventBridgeEnabled"):
                bucket.set_notification_configuration({"EventBridgeConfiguration": {}})
            versioning = properties.get("VersioningConfiguration") or {}
            if versioning.get("Status"):
                backend = s3_models.s3_backends[account_id][get_partition(region_name)]
                backend.put_bucket_versioning(bucket.name, versioning["Status"])
            return bucket

        return create_from_cloudformation_json

    patch_once(s3_models.FakeBucket, "create_from_cloudformation_json", build)


def _path_value(path: str, event: dict):
    from jsonpath_ng.ext import parse

    found = parse(path).find(event)
    return found[0].value if found else None


def transformed_input(template: str, paths: dict[str, str], event: dict) -> str:
    """`template` with each `<name>` of `paths` filled from `event`: raw inside a JSON string, JSON text outside."""
    values = {name: _path_value(path, event) for name, path in paths.items()}
    out, in_string, index = [], False, 0
    while index < len(template):
        char = template[index]
        name = template[index + 1 :].split(">", 1)[0] if char == "<" else None
        if name in values:
            value = values[name]
            if in_string:
                out.append("" if value is None else value if isinstance(value, str) else json.dumps(value))
            else:
                out.append(json.dumps(value))
            index += len(name) + 2
            continue
        if char == '"' and (index == 0 or template[index - 1] != "\\"):
            in_string = not in_string
        out.append(char)
        index += 1
    return "".join(out)


def _start_execution(target: dict, event: dict, account: str, region: str) -> None:
    from . import iam_enforcement

    if iam_enforcement.enforcing():  # EventBridge starts the execution with the target's role
        iam_enforcement.rule_may_start(target, account)
    transformer = target.get("InputTransformer") or {}
    event = {"id": str(uuid.uuid4()), "ingestion-time": time.time(), **event}
    if transformer:
        body = transformed_input(transformer["InputTemplate"], transformer.get("InputPathsMap", {}), event)
    else:
        body = target.get("Input") or event
    body = body if isinstance(body, str) else json.dumps(body)
    parser_models.stepfunctions_parser_backends[account][region].start_execution(target["Arn"], execution_input=body)


def rules_start_state_machines() -> None:
    def build(original):
        def send_to_targets(self, original_event, transform_input: bool = True) -> None:
            if not self.event_pattern.matches_event(original_event):
                return
            machines = [t for t in self.targets if parse_arn(t["Arn"]).service == "states"]
            for target in machines:
                try:
                    _start_execution(target, original_event, self.account_id, self.region_name)
                except Exception as err:  # moto's S3 notifier swallows errors: say it, as EventBridge's metrics would
                    print(f"emulator: rule {self.name} could not start {target['Arn']}: {err!r}", file=sys.stderr)
                    raise
            others = [t for t in self.targets if t not in machines]
            if others:
                saved, self.targets = self.targets, others
                try:
                    original(self, original_event, transform_input)
                finally:
                    self.targets = saved

        return send_to_targets

    patch_once(events_models.Rule, "send_to_targets", build)


def unnamed_executions_get_a_uuid() -> None:
    def build(original):
        def start_execution(self, state_machine_arn, name=None, execution_input=None, trace_header=None):
            return original(self, state_machine_arn, name or str(uuid.uuid4()), execution_input, trace_header)

        return start_execution

    patch_once(parser_models.StepFunctionsParserBackend, "start_execution", build)


def _iso_start_time(started: datetime) -> str:
    utc = started.astimezone(UTC) if started.tzinfo else started
    return utc.strftime("%Y-%m-%dT%H:%M:%S.") + f"{utc.microsecond // 1000:03d}Z"


def execution_start_time_is_a_string() -> None:
    from moto.stepfunctions.parser.backend import execution_worker

    def build(original):
        def _get_evaluation_environment(self):
            env = original(self)
            execution = env.states.context_object.context_object_data["Execution"]
            if isinstance(execution.get("StartTime"), datetime):
                execution["StartTime"] = _iso_start_time(execution["StartTime"])
            return env

        return _get_evaluation_environment

    patch_once(execution_worker.ExecutionWorker, "_get_evaluation_environment", build)


def test_event_pattern_answers() -> None:
    from moto.events.responses import EventsHandler

    def test_event_pattern(self) -> tuple[str, dict]:
        pattern = events_models.EventPattern.load(self._get_param("EventPattern"))
        event = json.loads(self._get_param("Event"))
        return json.dumps({"Result": bool(pattern.matches_event(event))}), self.response_headers

    patch_once(EventsHandler, "test_event_pattern", lambda original: test_event_pattern)


@dataclass
class EmulatedClock:
    """Scales the interpreter's waits; `waits` lists (kind, seconds asked) in order."""

    scale: float = 1.0
    waits: list[tuple[str, float]] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def asked(self, kind: str, seconds: float) -> float:
        with self._lock:
            self.waits.append((kind, float(seconds)))
        return seconds * self.scale


CLOCK = EmulatedClock()


class _ScaledTime:
    """Stands in for the `time` module inside retrier_decl: only sleep() is scaled."""

    def __getattr__(self, name):
        return getattr(time, name)

    @staticmethod
    def sleep(seconds: float) -> None:
        time.sleep(CLOCK.asked("retry", seconds))


def _scaled_wait_interval(self, env, wait_seconds: int) -> None:
    scaled = CLOCK.asked("wait", wait_seconds)
    if scaled > 0:
        env.program_state_event.wait(scaled)


def scaled_waits() -> None:
    if not isinstance(retrier_decl.time, _ScaledTime):
        retrier_decl.time = _ScaledTime()
    patch_once(wait_function.WaitFunction, "_wait_interval", lambda original: _scaled_wait_interval)


def _as_json(value):
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, StreamingBody):
        return value.read().decode("utf-8")
    if isinstance(value, dict):
        return {k: _as_json(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_as_json(v) for v in value]
    return value


def aws_sdk_answers_as_json() -> None:
    def build(original):
        def _eval_service_task(self, env, *args, **kwargs):
            original(self, env, *args, **kwargs)
            env.stack.append(_as_json(env.stack.pop()))

        return _eval_service_task

    patch_once(state_task_service_aws_sdk.StateTaskServiceAwsSdk, "_eval_service_task", build)


def definitions_parsed_once() -> None:
    from moto.stepfunctions.parser.asl.parse import asl_parser
    from moto.stepfunctions.parser.asl.parse.preprocessor import Preprocessor

    def build(original):
        @functools.lru_cache(maxsize=128)
        def syntax_tree(definition: str):
            return original(definition)[1]  # a definition that fails raises here and is not kept

        def parse(definition: str):
            tree = syntax_tree(definition)
            return Preprocessor().visit(tree), tree

        return parse

    patch_once(asl_parser.AmazonStateLanguageParser, "parse", build)


def apply_all(*, time_scale: float) -> EmulatedClock:
    executing_backend_for_cloudformation()
    bucket_settings_from_cloudformation()
    rules_start_state_machines()
    unnamed_executions_get_a_uuid()
    execution_start_time_is_a_string()
    test_event_pattern_answers()
    scaled_waits()
    aws_sdk_answers_as_json()
    definitions_parsed_once()
    CLOCK.scale = time_scale
    return CLOCK
