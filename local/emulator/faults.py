"""Failure drills for the emulated SageMaker: what a real account does now and then, on purpose.

A drill names the job it hits by a substring of the job name and which try (1 = the first job whose name
matches); the runner consults the plan before each CreateTrainingJob and before running each job.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

CAPACITY_REASON = (
    "CapacityError: Unable to provision requested ML compute capacity. Please retry using a different ML instance type."
)
KINDS = ("throttle", "capacity", "algorithm_error", "no_metrics", "max_runtime")
MAX_RUNTIME_DRILL_S = 1.0  # the job's MaxRuntimeInSeconds under the max_runtime drill (the emulated clock)


@dataclass(frozen=True)
class Drill:
    """`kind` at the `tries`-th (1-based) matching call; `throttle` answers CreateTrainingJob with
    ThrottlingException, `capacity` fails the job as SageMaker does when no instance is free,
    `algorithm_error` fails it as a crashing script would, `no_metrics` runs it but its log lines carry no
    metric (a trial SageMaker cannot score), `max_runtime` runs it with MaxRuntimeInSeconds counted as
    MAX_RUNTIME_DRILL_S (hours in the request, seconds here), so it runs out of time as SageMaker would stop it."""

    kind: str
    job_contains: str = ""
    tries: tuple[int, ...] = (1,)

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"drill kind {self.kind!r}; expected one of {', '.join(KINDS)}")


@dataclass
class FaultPlan:
    drills: list[Drill] = field(default_factory=list)
    _seen: dict[tuple[int, str], int] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def hit(self, stage: str, job_name: str) -> str | None:
        """The drill kind that applies to this call of `stage` ('create' or 'run') for `job_name`, if any."""
        kinds = ("throttle",) if stage == "create" else ("capacity", "algorithm_error", "no_metrics", "max_runtime")
        with self._lock:
            for index, drill in enumerate(self.drills):
                if drill.kind not in kinds or drill.job_contains not in job_name:
                    continue
                count = self._seen[(index, stage)] = self._seen.get((index, stage), 0) + 1
                if count in drill.tries:
                    return drill.kind
        return None
