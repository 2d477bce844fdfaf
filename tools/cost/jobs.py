"""SageMaker job states of every state machine, each at its bound: a new job state is priced without a code change."""

from __future__ import annotations

import dataclasses
import json
import re
from typing import NamedTuple

from tools.cost.cfn import as_int, resources
from tools.cost.model import Job

JOB_TASK = re.compile(r":sagemaker:(createTrainingJob|createProcessingJob|createHyperParameterTuningJob)(\.\w+)?$")
TRAINING_DEFAULT_MAX_RUNTIME_S = 86400  # SageMaker's MaxRuntimeInSeconds when a training job sets none


class _Shape(NamedTuple):
    """Where each API's request keeps what a job's price depends on."""

    kind: str
    usage: str
    runs: int
    resource: dict
    stopping: dict
    spot: bool
    default_seconds: int | None


def _definition_text(props: dict) -> str | None:
    """A state machine's definition as JSON text; a token inside a string is replaced by TOKEN."""
    if "Definition" in props:
        return json.dumps(props["Definition"])
    value = props.get("DefinitionString")
    if isinstance(value, str):
        return value
    if isinstance(value, dict) and "Fn::Join" in value:
        _, parts = value["Fn::Join"]
        return "".join(p if isinstance(p, str) else "TOKEN" for p in parts)
    return None


def _task_states(states: dict, prefix: str = "", in_map: bool = False):
    """(path, state, inside a Map) of every Task, through Parallel branches and Map iterators."""
    for name, state in sorted(states.items()):
        path = f"{prefix}{name}"
        if state.get("Type") == "Task":
            yield path, state, in_map
        for branch in state.get("Branches") or []:
            yield from _task_states(branch.get("States", {}), f"{path}/", in_map)
        inner = state.get("ItemProcessor") or state.get("Iterator")
        if inner:
            yield from _task_states(inner.get("States", {}), f"{path}/", True)


def _alternative_jobs(states: dict) -> dict[str, str]:
    """{job state: Choice state} for top-level Choices that branch straight into two or more job states."""
    found = {}
    for name, state in sorted(states.items()):
        if state.get("Type") != "Choice":
            continue
        targets = {c.get("Next") for c in state.get("Choices", [])} | {state.get("Default")}
        jobs = sorted(t for t in targets if t and JOB_TASK.search(str(states.get(t, {}).get("Resource", ""))))
        if len(jobs) > 1:
            found.update({job: name for job in jobs})
    return found


def _shape(api: str, params: dict) -> _Shape:
    if api == "createProcessingJob":
        resource = (params.get("ProcessingResources") or {}).get("ClusterConfig") or {}
        return _Shape("processing job", "processing", 1, resource, params.get("StoppingCondition") or {}, False, None)
    definition, kind, runs = params, "training job", 1
    if api == "createHyperParameterTuningJob":
        definition = params.get("TrainingJobDefinition") or {}
        limits = (params.get("HyperParameterTuningJobConfig") or {}).get("ResourceLimits") or {}
        kind, runs = "tuning job", as_int(limits.get("MaxNumberOfTrainingJobs"), 0)
    return _Shape(
        kind,
        "training",
        runs,
        definition.get("ResourceConfig") or {},
        definition.get("StoppingCondition") or {},
        definition.get("EnableManagedSpotTraining") is True,
        TRAINING_DEFAULT_MAX_RUNTIME_S,
    )


def _job_of(name: str, api: str, params: dict) -> Job:
    """A Job from a createTrainingJob / createProcessingJob / createHyperParameterTuningJob request."""
    shape = _shape(api, params)
    itype = shape.resource.get("InstanceType")
    stopping = shape.stopping
    seconds = (
        None if "MaxRuntimeInSeconds.$" in stopping else stopping.get("MaxRuntimeInSeconds", shape.default_seconds)
    )
    problem = None
    if shape.runs < 1:
        problem = f"{shape.kind} {name}: no literal ResourceLimits.MaxNumberOfTrainingJobs; cannot bound its trials"
    elif not isinstance(seconds, int):
        problem = f"{shape.kind} {name}: no literal StoppingCondition.MaxRuntimeInSeconds; cannot bound its runtime"
    return Job(
        name,
        shape.kind,
        shape.usage,
        itype if isinstance(itype, str) and itype.startswith("ml.") else None,
        as_int(shape.resource.get("InstanceCount"), 1),
        seconds / 3600 if isinstance(seconds, int) else None,
        shape.spot,
        max(shape.runs, 1),
        problem,
    )


def _unreadable(where: str) -> Job:
    problem = f"state machine {where}: definition is not readable JSON; cannot price its jobs"
    return Job(where, "state machine", "training", None, 1, None, problem=problem)


def _machine_jobs(where: str, definition: dict) -> list[Job]:
    """The job states of one definition; a job in a Map runs an unbounded number of times, so is not priced."""
    choices = _alternative_jobs(definition.get("States", {}))
    jobs = []
    for path, state, in_map in _task_states(definition.get("States", {})):
        match = JOB_TASK.search(str(state.get("Resource", "")))
        if not match:
            continue
        job = _job_of(f"{where}/{path}", match.group(1), state.get("Parameters") or {})
        if path in choices:
            job = dataclasses.replace(job, choice=f"{where}/{choices[path]}")
        if in_map:
            job = dataclasses.replace(
                job,
                problem=f"{job.kind} {job.name}: inside a Map state, the number of "
                "runs per execution is not bounded; cannot price it",
            )
        jobs.append(job)
    return jobs


def jobs_of(stack: str, template: dict) -> list[Job]:
    """Every SageMaker job state of every state machine in the template, whatever its name."""
    machines = [
        (lid, res)
        for lid, res in sorted(resources(template).items())
        if res.get("Type") == "AWS::StepFunctions::StateMachine"
    ]
    jobs = []
    for lid, res in machines:
        where = f"{stack}/{lid}" if len(machines) > 1 else stack
        try:
            definition = json.loads(_definition_text(res.get("Properties", {})) or "")
        except json.JSONDecodeError:
            jobs.append(_unreadable(where))
            continue
        jobs += _machine_jobs(where, definition)
    return jobs
