"""Pricing a workload: each endpoint at min and max scale, each stack's interface endpoints, each job at its bound."""

from __future__ import annotations

import dataclasses
from typing import Any

from tools.cost.model import Endpoint, Estimate, InterfaceEndpoints, Job, Line, Workload
from tools.cost.prices import PriceTable, UnpricedError
from tools.cost.report import money
from tools.cost.templates import workload_from_templates


def estimate(workload: Workload, table: PriceTable) -> Estimate:
    """Every priced line of the workload; an unpriced one carries its problem instead of a guess."""
    region, note = table.region_for(workload.region)
    result = Estimate(region=region, region_note=note)
    for ep in sorted(workload.endpoints, key=lambda e: e.name):
        result.lines += _endpoint_lines(ep, region, table)
    for vpce in sorted(workload.interface_endpoints, key=lambda v: v.stack):
        result.lines.append(_vpce_line(vpce, region, table))
    for job in sorted(workload.jobs, key=lambda j: j.name):
        result.lines.append(_job_line(job, region, table))
    return result


def _endpoint_lines(ep: Endpoint, region: str, table: PriceTable) -> list[Line]:
    lines = []
    for scale, count in (("min", ep.min_count), ("max", ep.max_count)):
        key = f"endpoint {ep.name} @{scale}"
        label = f"endpoint {ep.name} at {scale} scale"
        try:
            unit = table.price("inference", region, ep.instance_type, f"endpoint {ep.name}")
        except UnpricedError as err:
            lines.append(Line(key, label, ep.instance_type, count, None, None, None, problem=str(err)))
            continue
        hourly = unit * count
        billed = f"{count} x {table.hours_per_month:g} h/month"
        total = hourly * table.hours_per_month
        note = idle_note(unit) if ep.scales_to_zero and count == 0 else ""
        lines.append(
            Line(key, label, ep.instance_type, count, None, hourly, total, note, billed=billed, unit_price=unit)
        )
    return lines


def idle_note(unit: float) -> str:
    """The assumption behind a scale-to-zero endpoint's $0 at min scale."""
    return (
        f"scales to zero (serving.scale_to_zero): $0 while idle, {money(unit)} per instance-hour while a copy runs; "
        "assumed billed only while SageMaker runs an instance for a copy (ManagedInstanceScaling MinInstanceCount "
        "0), each active spell at least until idle_minutes pass without a request; max scale: every instance all "
        "month"
    )


def _vpce_line(vpce: InterfaceEndpoints, region: str, table: PriceTable) -> Line:
    key, label = f"vpc-endpoints {vpce.stack}", f"interface VPC endpoints {vpce.stack}"
    billed = f"{vpce.count} endpoints, {vpce.enis} endpoint-AZs x {table.hours_per_month:g} h/month"
    try:
        unit = table.eni_price(region, label)
    except UnpricedError as err:
        return Line(key, label, "endpoint-AZ", vpce.enis, None, None, None, problem=str(err), billed=billed)
    hourly = unit * vpce.enis
    total = hourly * table.hours_per_month
    return Line(key, label, "endpoint-AZ", vpce.enis, None, hourly, total, billed=billed, unit_price=unit)


def _unpriced_job_line(job: Job) -> Line:
    """The job's line before pricing: what it is and what would be billed."""
    trials = f", {job.runs} trials" if job.runs > 1 else ""
    label = f"{job.kind} {job.name} at max runtime{trials}" + (" (managed spot)" if job.spot else "")
    hours = None if job.max_runtime_hours is None else job.max_runtime_hours * job.runs
    note = f"one of the jobs {job.choice} chooses from" if job.choice else ""
    per_run = "?" if job.max_runtime_hours is None else f"{job.max_runtime_hours:g}"
    billed = (f"{job.runs} trials x " if job.runs > 1 else "") + f"{job.instance_count} x {per_run} h"
    itype = job.instance_type or "<set at run time>"
    return Line(
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


def _job_line(job: Job, region: str, table: PriceTable) -> Line:
    """A job at its ceiling; a managed spot job at the table's saving, with the on-demand ceiling in its note."""
    unpriced = _unpriced_job_line(job)
    hours = None if job.max_runtime_hours is None else job.max_runtime_hours * job.runs
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


def estimate_stacks(stacks: dict[str, Any], table: PriceTable) -> list[Estimate]:
    """One estimate per region of a cloud assembly's stacks ({name: StackArtifact}; env-agnostic ones together)."""
    by_region: dict[str | None, dict[str, dict]] = {}
    for name, art in sorted(stacks.items()):
        by_region.setdefault(art.region, {})[name] = art.template
    return [
        estimate(workload_from_templates(by_region[region], region), table) for region in sorted(by_region, key=str)
    ]
