#!/usr/bin/env python3
"""What an environment costs, from its synthesized templates and the committed price table (tools/prices.json).

    make cost ENV=dev                            # synth, then: python tools/cost.py --cdk-out cdk.out

Prices every SageMaker endpoint of every stack at its autoscaling min and max (hourly and monthly), every
interface VPC endpoint (per endpoint and Availability Zone, i.e. per ENI, an always-on charge of the
isolated environments), and every SageMaker job state (createTrainingJob, createProcessingJob,
createHyperParameterTuningJob) of every state machine at its bound: max runtime x instances, times
MaxNumberOfTrainingJobs for a tuning job. A new job state is priced without a code change. Managed spot jobs
show the table's labelled saving assumption and the on-demand ceiling. A type without a price in the table
is never guessed: the priced lines are printed, then one `cost error:` line on stderr, exit 1.

The review summary (tools/review_diff.py) uses the same model for the cost delta of a change.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
PRICES = ROOT / "tools" / "prices.json"


class UnpricedError(Exception):
    """An instance type the table has no price for (one line)."""


@dataclass(frozen=True)
class Endpoint:
    name: str
    instance_type: str
    min_count: int
    max_count: int


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


SCOPE = (
    "scope: SageMaker real-time endpoints at min and max scale, interface VPC endpoints (per endpoint-AZ-hour), "
    "and every SageMaker job of every workflow at its bound"
)
LEFT_OUT = (
    "left out: S3 storage and requests, KMS keys and requests, "
    "CloudWatch logs, metrics, alarms and dashboards, Step Functions transitions, ML storage volumes "
    "(volume_size_gb), data capture to S3, data transfer and PrivateLink data processing (per GB), "
    "ECR images"
)
ASSUMPTIONS = (
    "assumptions: on-demand prices, no savings plans or free tier; endpoints run every hour of the month "
    "at the scale shown; each job runs to its max runtime (the ceiling) and a tuning job runs all its "
    "trials; spot jobs at the table's assumed saving"
)


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


class PriceTable:
    def __init__(self, data: dict[str, Any], path: Path = PRICES):
        self.data = data
        self.path = path
        self.as_of: str = data["as_of"]
        self.hours_per_month: float = float(data["hours_per_month"])
        self.spot_savings: float = float(data["managed_spot_savings"]["fraction"])
        self.spot_label: str = data["managed_spot_savings"]["label"]
        self.default_region: str = data["default_region"]
        self.recheck: str = data["recheck"]
        self.vpce: dict[str, Any] = data.get("vpc_interface_endpoint", {})

    @classmethod
    def load(cls, path: Path = PRICES) -> PriceTable:
        return cls(json.loads(Path(path).read_text(encoding="utf-8")), Path(path))

    def region_for(self, region: str | None) -> tuple[str, str]:
        if region is None or region.startswith("unknown"):
            return self.default_region, f"region not pinned; priced as {self.default_region}"
        return region, ""

    def price(self, usage: str, region: str, instance_type: str, where: str) -> float:
        table = self.data["regions"].get(region, {}).get(usage, {})
        if instance_type not in table:
            try:
                shown = self.path.relative_to(ROOT).as_posix()
            except ValueError:
                shown = self.path.name
            raise UnpricedError(
                f"{instance_type} ({where}) has no SageMaker {usage} price for {region} in {shown} "
                f"(as of {self.as_of}); add it there with its source instead of guessing"
            )
        return float(table[instance_type])

    def eni_price(self, region: str, where: str) -> float:
        prices = self.vpce.get("usd_per_az_hour", {})
        if region not in prices:
            raise UnpricedError(
                f"interface VPC endpoints ({where}) have no price for {region} in tools/prices.json "
                "(vpc_interface_endpoint); add it there with its source instead of guessing"
            )
        return float(prices[region])


def estimate(workload: Workload, table: PriceTable) -> Estimate:
    region, note = table.region_for(workload.region)
    result = Estimate(region=region, region_note=note)
    for ep in sorted(workload.endpoints, key=lambda e: e.name):
        for scale, count in (("min", ep.min_count), ("max", ep.max_count)):
            key = f"endpoint {ep.name} @{scale}"
            label = f"endpoint {ep.name} at {scale} scale"
            try:
                unit = table.price("inference", region, ep.instance_type, f"endpoint {ep.name}")
            except UnpricedError as err:
                result.lines.append(Line(key, label, ep.instance_type, count, None, None, None, problem=str(err)))
                continue
            hourly = unit * count
            result.lines.append(
                Line(
                    key,
                    label,
                    ep.instance_type,
                    count,
                    None,
                    hourly,
                    hourly * table.hours_per_month,
                    billed=f"{count} x {table.hours_per_month:g} h/month",
                    unit_price=unit,
                )
            )
    for vpce in sorted(workload.interface_endpoints, key=lambda v: v.stack):
        key, label = f"vpc-endpoints {vpce.stack}", f"interface VPC endpoints {vpce.stack}"
        billed = f"{vpce.count} endpoints, {vpce.enis} endpoint-AZs x {table.hours_per_month:g} h/month"
        try:
            unit = table.eni_price(region, label)
        except UnpricedError as err:
            result.lines.append(
                Line(key, label, "endpoint-AZ", vpce.enis, None, None, None, problem=str(err), billed=billed)
            )
            continue
        result.lines.append(
            Line(
                key,
                label,
                "endpoint-AZ",
                vpce.enis,
                None,
                unit * vpce.enis,
                unit * vpce.enis * table.hours_per_month,
                billed=billed,
                unit_price=unit,
            )
        )
    for job in sorted(workload.jobs, key=lambda j: j.name):
        result.lines.append(_job_line(job, region, table))
    return result


def _job_line(job: Job, region: str, table: PriceTable) -> Line:
    trials = f", {job.runs} trials" if job.runs > 1 else ""
    label = f"{job.kind} {job.name} at max runtime{trials}" + (" (managed spot)" if job.spot else "")
    itype = job.instance_type or "<set at run time>"
    hours = None if job.max_runtime_hours is None else job.max_runtime_hours * job.runs
    note = f"one of the jobs {job.choice} chooses from" if job.choice else ""
    per_run = "?" if job.max_runtime_hours is None else f"{job.max_runtime_hours:g}"
    billed = (f"{job.runs} trials x " if job.runs > 1 else "") + f"{job.instance_count} x {per_run} h"
    unpriced = Line(
        f"job {job.name}",
        label,
        itype,
        job.instance_count,
        hours or 0.0,
        None,
        None,
        note,
        choice=job.choice,
        billed=billed,
    )
    if job.problem or job.instance_type is None or hours is None:
        problem = job.problem or f"{job.kind} {job.name}: the instance type is chosen at run time; cannot price it"
        return dataclasses.replace(unpriced, problem=problem)
    try:
        unit = table.price(job.usage, region, job.instance_type, f"{job.kind} {job.name}")
    except UnpricedError as err:
        return dataclasses.replace(unpriced, problem=str(err))
    hourly = unit * job.instance_count
    ceiling = hourly * hours
    unpriced = dataclasses.replace(unpriced, unit_price=unit)
    notes = [n for n in (unpriced.note,) if n]
    if not job.spot:
        return dataclasses.replace(unpriced, usd_per_hour=hourly, usd_total=ceiling, note="; ".join(notes))
    spot_total = ceiling * (1 - table.spot_savings)
    notes.append(f"spot figure uses the {table.spot_label}; on-demand ceiling {money(ceiling)}")
    return dataclasses.replace(unpriced, usd_per_hour=hourly, usd_total=spot_total, note="; ".join(notes))


# ------------------------------------------------------------------------------------------- templates
def _resources(template: dict) -> dict[str, dict]:
    return template.get("Resources", {}) or {}


def _ref_target(value: Any) -> str | None:
    if isinstance(value, dict):
        if "Ref" in value:
            return value["Ref"]
        if "Fn::GetAtt" in value:
            att = value["Fn::GetAtt"]
            return att[0] if isinstance(att, list) else str(att).split(".")[0]
    return None


def _int(value: Any, default: int) -> int:
    try:
        return int(value)
    except (TypeError, ValueError):
        return default


def _endpoints_of(stack: str, template: dict) -> list[Endpoint]:
    resources = _resources(template)
    targets = [
        (lid, res.get("Properties", {}))
        for lid, res in sorted(resources.items())
        if res.get("Type") == "AWS::ApplicationAutoScaling::ScalableTarget"
        and res.get("Properties", {}).get("ScalableDimension") == "sagemaker:variant:DesiredInstanceCount"
    ]
    endpoints = []
    for lid, res in sorted(resources.items()):
        if res.get("Type") != "AWS::SageMaker::Endpoint":
            continue
        config_id = _ref_target(res.get("Properties", {}).get("EndpointConfigName"))
        config = resources.get(config_id or "", {}).get("Properties", {})
        variants = [v for v in config.get("ProductionVariants", []) if isinstance(v.get("InstanceType"), str)]
        for variant in variants:
            initial = _int(variant.get("InitialInstanceCount"), 1)
            low = high = initial
            name = variant.get("VariantName", "AllTraffic")
            for _, props in targets:
                resource_id = json.dumps(props.get("ResourceId"), sort_keys=True)
                if (f'"{lid}"' in resource_id or len(variants) == 1 and len(targets) == 1) and (
                    not isinstance(name, str) or name in resource_id or len(variants) == 1
                ):
                    low, high = _int(props.get("MinCapacity"), initial), _int(props.get("MaxCapacity"), initial)
                    break
            label = f"{stack}/{lid}" + (f"/{name}" if len(variants) > 1 else "")
            endpoints.append(Endpoint(label, variant["InstanceType"], low, high))
    return endpoints


def _definition_text(props: dict) -> str | None:
    if "Definition" in props:
        return json.dumps(props["Definition"])
    value = props.get("DefinitionString")
    if isinstance(value, str):
        return value
    if isinstance(value, dict) and "Fn::Join" in value:
        _, parts = value["Fn::Join"]
        return "".join(p if isinstance(p, str) else "TOKEN" for p in parts)
    return None


JOB_TASK = re.compile(r":sagemaker:(createTrainingJob|createProcessingJob|createHyperParameterTuningJob)(\.\w+)?$")
TRAINING_DEFAULT_MAX_RUNTIME_S = 86400  # SageMaker's MaxRuntimeInSeconds when a training job sets none


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


def _job_of(name: str, api: str, params: dict) -> Job:
    """A Job from a createTrainingJob / createProcessingJob / createHyperParameterTuningJob request."""
    if api == "createProcessingJob":
        kind, usage, runs = "processing job", "processing", 1
        resource = (params.get("ProcessingResources") or {}).get("ClusterConfig") or {}
        stopping, spot, default_s = params.get("StoppingCondition") or {}, False, None
    else:
        definition = params
        kind, usage, runs = "training job", "training", 1
        if api == "createHyperParameterTuningJob":
            definition = params.get("TrainingJobDefinition") or {}
            limits = (params.get("HyperParameterTuningJobConfig") or {}).get("ResourceLimits") or {}
            kind, runs = "tuning job", _int(limits.get("MaxNumberOfTrainingJobs"), 0)
        resource = definition.get("ResourceConfig") or {}
        stopping = definition.get("StoppingCondition") or {}
        spot, default_s = definition.get("EnableManagedSpotTraining") is True, TRAINING_DEFAULT_MAX_RUNTIME_S
    itype = resource.get("InstanceType")
    seconds = None if "MaxRuntimeInSeconds.$" in stopping else stopping.get("MaxRuntimeInSeconds", default_s)
    problem = None
    if runs < 1:
        problem = f"{kind} {name}: no literal ResourceLimits.MaxNumberOfTrainingJobs; cannot bound its trials"
    elif not isinstance(seconds, int):
        problem = f"{kind} {name}: no literal StoppingCondition.MaxRuntimeInSeconds; cannot bound its runtime"
    return Job(
        name,
        kind,
        usage,
        itype if isinstance(itype, str) and itype.startswith("ml.") else None,
        _int(resource.get("InstanceCount"), 1),
        seconds / 3600 if isinstance(seconds, int) else None,
        spot,
        max(runs, 1),
        problem,
    )


def _jobs_of(stack: str, template: dict) -> list[Job]:
    """Every SageMaker job state of every state machine in the template, whatever its name."""
    machines = [
        (lid, res)
        for lid, res in sorted(_resources(template).items())
        if res.get("Type") == "AWS::StepFunctions::StateMachine"
    ]
    jobs = []
    for lid, res in machines:
        where = f"{stack}/{lid}" if len(machines) > 1 else stack
        try:
            definition = json.loads(_definition_text(res.get("Properties", {})) or "")
        except json.JSONDecodeError:
            jobs.append(
                Job(
                    where,
                    "state machine",
                    "training",
                    None,
                    1,
                    None,
                    problem=f"state machine {where}: definition is not readable JSON; cannot price its jobs",
                )
            )
            continue
        choices = _alternative_jobs(definition.get("States", {}))
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


def _interface_endpoints_of(stack: str, template: dict) -> list[InterfaceEndpoints]:
    """Interface VPC endpoints and their ENIs (one per subnet, i.e. per AZ); gateway endpoints are free."""
    interface = [
        res.get("Properties", {})
        for res in _resources(template).values()
        if res.get("Type") == "AWS::EC2::VPCEndpoint"
        and res.get("Properties", {}).get("VpcEndpointType") == "Interface"
    ]
    if not interface:
        return []
    enis = sum(len(p["SubnetIds"]) if isinstance(p.get("SubnetIds"), list) else 1 for p in interface)
    return [InterfaceEndpoints(stack, len(interface), enis)]


def workload_from_templates(templates: dict[str, dict], region: str | None = None) -> Workload:
    """Endpoints (EndpointConfig variants + their scalable targets), interface VPC endpoints, and every job state."""
    endpoints: list[Endpoint] = []
    jobs: list[Job] = []
    vpces: list[InterfaceEndpoints] = []
    for stack in sorted(templates):
        endpoints += _endpoints_of(stack, templates[stack])
        jobs += _jobs_of(stack, templates[stack])
        vpces += _interface_endpoints_of(stack, templates[stack])
    return Workload(region, tuple(endpoints), tuple(jobs), tuple(vpces))


def estimate_stacks(stacks: dict[str, Any], table: PriceTable) -> list[Estimate]:
    """One estimate per region of a cloud assembly's stacks ({name: StackArtifact}; env-agnostic ones together)."""
    by_region: dict[str | None, dict[str, dict]] = {}
    for name, art in sorted(stacks.items()):
        by_region.setdefault(art.region, {})[name] = art.template
    return [
        estimate(workload_from_templates(by_region[region], region), table) for region in sorted(by_region, key=str)
    ]


# -------------------------------------------------------------------------------------------- output
def money(value: float | None) -> str:
    return "n/a" if value is None else f"${value:,.2f}"


def rate(value: float | None) -> str:
    """An hourly price as the table has it (up to 4 decimals): $0.115, not a rounded $0.12."""
    if value is None:
        return "n/a"
    text = f"{value:,.4f}".rstrip("0")
    return f"${text}{'0' * max(0, 2 - len(text.split('.')[1]))}"


def render_text(title: str, result: Estimate, table: PriceTable) -> str:
    where = result.region + (f" ({result.region_note})" if result.region_note else "")
    lines = [
        f"{title}: on-demand (SageMaker, PrivateLink), {where}, tools/prices.json as of {table.as_of}, "
        f"{table.hours_per_month:g} h/month",
    ]
    rows = [("item", "type", "billed (count x hours)", "USD/hour each", "USD total")]
    for line in result.lines:
        total = money(line.usd_total) + ("/month" if line.hours is None else " per run")
        rows.append((line.label, line.instance_type, line.billed, rate(line.unit_price), total))
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    for row in rows:
        lines.append("  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip())
    lines += [f"  note: {line.label}: {line.note}" for line in result.lines if line.note]
    return "\n".join(lines)


def _sum(lines: list[Line]) -> str:
    """Lines of one Choice's alternative jobs count once, at the dearest (an execution runs one of them)."""
    if any(line.usd_total is None for line in lines):
        return money(None)
    alone = sum(line.usd_total for line in lines if line.choice is None)
    groups: dict[str, float] = {}
    for line in lines:
        if line.choice is not None:
            groups[line.choice] = max(groups.get(line.choice, 0.0), line.usd_total)
    return money(alone + sum(groups.values()))


def total_lines(lines: list[Line]) -> dict[str, list[Line]]:
    """The lines of each total: always-on at min scale, at max scale (USD/month), one run of every workflow."""

    def chosen(prefix: str, suffix: str = "") -> list[Line]:
        return [line for line in lines if line.key.startswith(prefix) and line.key.endswith(suffix)]

    vpce = chosen("vpc-endpoints ")
    return {"min": chosen("endpoint ", "@min") + vpce, "max": chosen("endpoint ", "@max") + vpce, "run": chosen("job ")}


def total(lines: list[Line]) -> float | None:
    """Sum, counting one Choice's alternative jobs once at the dearest; None if any line is unpriced."""
    text = _sum(lines)
    return None if text == "n/a" else float(text.lstrip("$").replace(",", ""))


def totals_text(result: Estimate) -> str:
    """Always-on spend (SageMaker and interface VPC endpoints) at min and max scale, and one run of every workflow."""
    parts = total_lines(result.lines)
    vpce = [line for line in parts["min"] if line.key.startswith("vpc-endpoints ")]
    what = "endpoints" + (f" (incl. interface VPC endpoints {_sum(vpce)}/month)" if vpce else "")
    return (
        f"total: {what} {_sum(parts['min'])}/month at min scale, {_sum(parts['max'])}/month at max scale; "
        f"one execution of every workflow at its bound {_sum(parts['run'])}"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cdk-out", default="cdk.out", help="a synthesized cloud assembly (make synth ENV=...)")
    parser.add_argument("--prices", default=str(PRICES))
    args = parser.parse_args(argv)
    sys.path.insert(0, str(ROOT))
    from local.cloud_assembly import CloudAssemblyReader

    if not (Path(args.cdk_out) / "manifest.json").is_file():
        print(f"cost error: {args.cdk_out} is no cloud assembly; run make synth ENV=<env> first", file=sys.stderr)
        return 2
    stacks = CloudAssemblyReader(args.cdk_out).by_name()
    table = PriceTable.load(Path(args.prices))
    title = os.path.commonprefix(sorted(stacks)).rstrip("-") or args.cdk_out
    problems: list[str] = []
    for result in estimate_stacks(stacks, table):
        print(render_text(title, result, table))
        print(totals_text(result))
        problems += result.problems
    for line in (SCOPE, LEFT_OUT, ASSUMPTIONS):
        print(line)
    print(f"{table.recheck}")
    if problems:
        print(f"cost error: {problems[0]}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
