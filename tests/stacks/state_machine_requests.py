"""The requests every Task state of a synthesized state machine sends, with run-time values at their longest.

`resolved_definitions` turns each state machine's DefinitionString into its deployed ASL (intrinsics resolved to
the values of a fixed account and region: tests/stacks/policy_documents.py; a generated bucket name at
CloudFormation's 63-character maximum). `task_requests` then walks the states from StartAt and evaluates every
Task's `Parameters` against a worst-case state document: Pass states' results as written, a job state's
`ResultSelector` against what Describe* echoes of its request, `$$.State.RetryCount` at the state's largest
`MaxAttempts`, `$$.Execution.StartTime` with all 17 digits, a counter a Choice bounds (`NumericLessThan`) at that
bound. What the template does not determine (the execution input, fields only SageMaker fills) is `Unknown`.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from tests.stacks.botocore_limits import Unknown, _service_model
from tests.stacks.policy_documents import Resolver

# Fields the optimized integration sends as JSON text when the state gives an object (connect-sns: Message).
_SERIALIZED = {("sns", "Publish"): ("Message",)}
START_TIME = "2026-12-31T23:59:59.999Z"  # Step Functions' format for $$.Execution.StartTime
EXECUTION_ID = "arn:aws:states:us-east-1:123456789012:execution:machine:" + "e" * 80
MAX_BUCKET_NAME = 63


@dataclass(frozen=True)
class TaskRequest:
    state: str
    resource: str  # the Task's Resource ARN
    service: str  # botocore service name
    operation: str  # botocore operation name
    params: dict[str, Any]


class _Resolver(Resolver):
    """Tokens as they deploy: an SSM parameter's Ref is its Name, a generated bucket name is 63 characters."""

    def _Ref(self, stack: str, target: str) -> Any:
        resource = self.templates[stack]["Resources"].get(target)
        if (
            resource
            and resource["Type"] == "AWS::SSM::Parameter"
            and isinstance(resource["Properties"].get("Name"), str)
        ):
            return resource["Properties"]["Name"]
        if resource and resource["Type"] == "AWS::S3::Bucket":
            name = f"{stack.lower()}-{target.lower()}-"
            return (name + "x" * MAX_BUCKET_NAME)[:MAX_BUCKET_NAME]
        return super()._Ref(stack, target)


def resolved_definitions(templates: Mapping[str, dict]) -> dict[str, dict]:
    """{'<unit>/<logical id>': ASL} of every state machine in one environment's templates ({unit: template})."""
    resolver = _Resolver(dict(templates))
    return {
        f"{unit}/{logical_id}": json.loads(resolver.resolve(unit, resource["Properties"]["DefinitionString"]))
        for unit, template in sorted(templates.items())
        for logical_id, resource in sorted(template["Resources"].items())
        if resource["Type"] == "AWS::StepFunctions::StateMachine"
    }


def integration(resource: str) -> tuple[str, str, str]:
    """(service, botocore operation, pattern) of a Task's Resource: `arn:aws:states:::sagemaker:createTrainingJob.sync`
    -> ('sagemaker', 'CreateTrainingJob', 'sync'); `...:::aws-sdk:ssm:putParameter` -> ('ssm', 'PutParameter', '')."""
    match = re.fullmatch(r"arn:[\w-]+:states:::(?:aws-sdk:)?([\w-]+):(\w+)(?:\.(\w+))?", resource)
    if match is None:
        raise ValueError(f"not a service integration: {resource}")
    service, action, pattern = match.groups()
    names = {name.lower(): name for name in _service_model(service).operation_names}
    return service, names[action.lower()], pattern or ""


def task_states(definition: dict) -> Iterator[tuple[str, dict]]:
    """(name, state) of every Task, inside Parallel branches and Map iterators too."""
    for name, state in definition["States"].items():
        if state["Type"] == "Task":
            yield name, state
        nested = [state.get("Iterator"), state.get("ItemProcessor")]
        for branch in [*state.get("Branches", []), *filter(None, nested)]:
            yield from task_states(branch)


def task_requests(definition: dict) -> list[TaskRequest]:
    """Every Task's request at its worst case, in the order the states are first reached from StartAt."""
    walk = _Walk(definition)
    return walk.run()


class _Walk:
    def __init__(self, definition: dict):
        self.states = definition["States"]
        self.start = definition["StartAt"]
        self.document: dict[str, Any] = {}
        self.bounds = dict(_counter_bounds(self.states))
        self.retry_count = 0

    def run(self) -> list[TaskRequest]:
        requests, seen, queue = [], set(), [self.start]
        while queue:
            name = queue.pop(0)
            if name in seen:
                continue
            seen.add(name)
            state = self.states[name]
            request = self._visit(name, state)
            if request is not None:
                requests.append(request)
            queue += _successors(state)
        return requests

    def _visit(self, name: str, state: dict) -> TaskRequest | None:
        kind = state["Type"]
        self.retry_count = max((r.get("MaxAttempts", 3) for r in state.get("Retry", [])), default=0)
        if kind == "Pass":
            result = (
                self._evaluate(state["Parameters"], self.document)
                if "Parameters" in state
                else state.get("Result", self.document)
            )
            self._put(state.get("ResultPath", "$"), result)
        if kind != "Task":
            return None
        service, operation, _ = integration(state["Resource"])
        params = self._evaluate(state.get("Parameters", {}), self.document)
        for key in _SERIALIZED.get((service, operation), ()):
            if isinstance(params.get(key), dict | list):
                params[key] = _json_text(params[key])
        if "ResultSelector" in state:  # Describe* echoes the request; what only the service fills is Unknown
            self._put(state.get("ResultPath", "$"), self._evaluate(state["ResultSelector"], params))
        return TaskRequest(name, state["Resource"], service, operation, params)

    def _put(self, path: str | None, value: Any) -> None:
        if path is None:
            return
        if path == "$":
            self.document = value if isinstance(value, dict) else {}
            return
        target = self.document
        *parents, last = path.removeprefix("$.").split(".")
        for part in parents:
            target = target.setdefault(part, {})
        target[last] = value

    def _evaluate(self, node: Any, document: Any) -> Any:
        if isinstance(node, dict):
            return {
                key.removesuffix(".$"): self._expression(value, document)
                if key.endswith(".$")
                else self._evaluate(value, document)
                for key, value in node.items()
            }
        if isinstance(node, list):
            return [self._evaluate(item, document) for item in node]
        return node

    def _expression(self, text: str, document: Any) -> Any:
        parsed, rest = _parse(text.strip())
        if rest.strip():
            raise ValueError(f"cannot parse {text!r}")
        return self._value(parsed, document)

    def _value(self, node: Any, document: Any) -> Any:
        if isinstance(node, _Path):
            return self._lookup(node.text, document)
        if isinstance(node, _Call):
            args = [self._value(arg, document) for arg in node.args]
            if node.name == "States.MathAdd" and isinstance(node.args[0], _Path) and node.args[0].text in self.bounds:
                return self.bounds[node.args[0].text]  # a loop counter: its largest value
            if any(isinstance(arg, Unknown) for arg in args):
                return Unknown(f"{node.name} of a run-time value")
            return _INTRINSICS[node.name](*args)
        return node

    def _lookup(self, path: str, document: Any) -> Any:
        if path.startswith("$$."):
            context = {
                "$$.State.RetryCount": self.retry_count,
                "$$.Execution.Id": EXECUTION_ID,
                "$$.Execution.StartTime": START_TIME,
            }
            return context.get(path, Unknown(path))
        if path in self.bounds:
            return self.bounds[path]
        if "[" in path:
            return Unknown(f"{path} (an index or filter over run-time data)")
        value = document
        for part in filter(None, path.removeprefix("$").split(".")):
            if not isinstance(value, dict) or part not in value:
                return Unknown(path)
            value = value[part]
        return value


def _json_text(value: Any) -> str | Unknown:
    """JSON text of `value`, or Unknown when a part of it is (its length then depends on the run)."""

    def known(node: Any) -> bool:
        if isinstance(node, dict):
            return all(map(known, node.values()))
        if isinstance(node, list):
            return all(map(known, node))
        return not isinstance(node, Unknown)

    return json.dumps(value, separators=(",", ":")) if known(value) else Unknown("JSON text of a run-time value")


def _successors(state: dict) -> list[str]:
    found = [state["Next"]] if "Next" in state else []
    found += [choice["Next"] for choice in state.get("Choices", [])]
    found += [state["Default"]] if "Default" in state else []
    found += [catch["Next"] for catch in state.get("Catch", [])]
    return found


def _counter_bounds(states: dict) -> Iterator[tuple[str, int]]:
    """A Choice rule `<path> < N` guarding a loop: the counter reaches at most N."""

    def rules(rule: dict) -> Iterator[dict]:
        yield rule
        for key in ("And", "Or"):
            for inner in rule.get(key, []):
                yield from rules(inner)
        if "Not" in rule:
            yield from rules(rule["Not"])

    for state in states.values():
        for choice in state.get("Choices", []):
            for rule in rules(choice):
                if "NumericLessThan" in rule:
                    yield rule["Variable"], rule["NumericLessThan"]
                if "NumericLessThanEquals" in rule:
                    yield rule["Variable"], rule["NumericLessThanEquals"] + 1


# --- intrinsic functions -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Path:
    text: str


@dataclass(frozen=True)
class _Call:
    name: str
    args: tuple[Any, ...]


def _parse(text: str) -> tuple[Any, str]:
    """One intrinsic argument from the front of `text`: a call, a path, a 'string' or a number; and the rest."""
    text = text.lstrip()
    if text.startswith("States."):
        name, rest = text.split("(", 1)
        args: list[Any] = []
        rest = rest.lstrip()
        while not rest.startswith(")"):
            arg, rest = _parse(rest)
            args.append(arg)
            rest = rest.lstrip().removeprefix(",")
        return _Call(name.strip(), tuple(args)), rest[1:]
    if text.startswith("'"):
        match = re.match(r"'((?:[^'\\]|\\.)*)'", text)
        return re.sub(r"\\(.)", r"\1", match.group(1)), text[match.end() :]
    if text.startswith("$"):
        match = re.match(r"(?:\[\?\(.*?\)\]|\[[^\]]*\]|[^,)\s\[])+", text)  # filters `[?(...)]` kept whole
        return _Path(match.group(0)), text[match.end() :]
    for word, value in (("true", True), ("false", False), ("null", None)):
        if text.startswith(word):
            return value, text[len(word) :]
    match = re.match(r"-?\d+(\.\d+)?", text)
    number = match.group(0)
    return (float(number) if "." in number else int(number)), text[match.end() :]


def _format(template: str, *args: Any) -> str:
    pieces = template.split("{}")
    if len(pieces) != len(args) + 1:
        raise ValueError(f"States.Format {template!r} with {len(args)} arguments")
    text = pieces[0]
    for arg, piece in zip(args, pieces[1:], strict=True):
        text += (arg if isinstance(arg, str) else json.dumps(arg)) + piece
    return text


def _hash(data: str, algorithm: str) -> str:
    return hashlib.new(algorithm.replace("-", "").lower(), data.encode()).hexdigest()


def _split(text: str, separators: str) -> list[str]:
    return [part for part in re.split(f"[{re.escape(separators)}]", text) if part]


_INTRINSICS = {
    "States.Format": _format,
    "States.Hash": _hash,
    "States.StringSplit": _split,
    "States.ArrayGetItem": lambda items, index: items[index],
    "States.MathAdd": lambda a, b: a + b,
    "States.JsonMerge": lambda a, b, deep: {**a, **b},
    "States.StringToJson": json.loads,
    "States.JsonToString": _json_text,
    "States.ArrayContains": lambda items, value: value in items,
    "States.ArrayLength": len,
}
