"""What is priced: the workload read from the templates, and the priced lines of an estimate."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Endpoint:
    name: str
    instance_type: str
    min_count: int
    max_count: int
    scales_to_zero: bool = False  # an inference-component endpoint: instances only while a copy runs


@dataclass(frozen=True)
class Job:
    """One SageMaker job state of a state machine, at its bound (max runtime, and every trial of a tuning job)."""

    name: str  # <stack>/<state>
    kind: str  # "training job", "processing job", "tuning job"
    usage: str  # the price table's usage: training or processing
    instance_type: str | None
    instance_count: int
    max_runtime_hours: float | None
    spot: bool = False
    runs: int = 1  # a tuning job: MaxNumberOfTrainingJobs
    problem: str | None = None  # why the state cannot be priced (a JSONPath, a missing bound)
    choice: str | None = None  # the Choice state that runs this job or another one: one of them per execution


@dataclass(frozen=True)
class InterfaceEndpoints:
    """A stack's interface VPC endpoints: billed per endpoint per Availability Zone (one ENI each) per hour."""

    stack: str
    count: int
    enis: int  # the sum over endpoints of their subnets (one per AZ)


@dataclass(frozen=True)
class Workload:
    region: str | None
    endpoints: tuple[Endpoint, ...] = ()
    jobs: tuple[Job, ...] = ()
    interface_endpoints: tuple[InterfaceEndpoints, ...] = ()


@dataclass(frozen=True)
class Line:
    """One priced item; usd_* are None when the type has no price (see `problem`)."""

    key: str  # stable identity across base/head, e.g. "endpoint <name> @min"
    label: str
    instance_type: str
    count: int
    hours: float | None  # None: per hour/month figures; else a one-off run of this many hours
    usd_per_hour: float | None
    usd_total: float | None  # month (hours_per_month) for endpoints, the whole run for training
    note: str = ""
    problem: str | None = None
    choice: str | None = None  # lines of one Choice's alternative jobs: an execution runs one of them
    billed: str = ""  # what usd_total is the price of: "2 x 730 h/month", "100 trials x 1 x 1 h"
    unit_price: float | None = None  # USD per instance-hour (or per endpoint-AZ-hour), as the table has it


@dataclass
class Estimate:
    region: str
    region_note: str
    lines: list[Line] = field(default_factory=list)

    @property
    def problems(self) -> list[str]:
        return sorted({line.problem for line in self.lines if line.problem})
