#!/usr/bin/env python3
"""What an environment costs per hour and per month, from the committed price table (tools/prices.json).

    python tools/cost.py --env dev            # make cost ENV=dev

Prints every endpoint at min and max scale (hourly and monthly) and one training run at its max
runtime (managed spot: the on-demand ceiling and the planning estimate after the table's assumed
saving). A type without a price in the table is never guessed: the priced lines are printed, then
one `cost error:` line on stderr, exit 1.

The same model prices synthesized templates (`workload_from_templates`), which is how the review
summary (tools/review_diff.py) shows the cost delta of a change.
"""

from __future__ import annotations

import argparse
import json
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
class TrainingRun:
    name: str
    instance_type: str | None  # None: chosen at run time (a JSONPath in the state machine)
    instance_count: int
    max_runtime_hours: float
    spot: bool


@dataclass(frozen=True)
class Workload:
    region: str | None
    endpoints: tuple[Endpoint, ...] = ()
    trainings: tuple[TrainingRun, ...] = ()


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
        self.default_region: str = data["default_region"]

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
                Line(key, label, ep.instance_type, count, None, hourly, hourly * table.hours_per_month)
            )
    for run in sorted(workload.trainings, key=lambda t: t.name):
        key = f"training {run.name}"
        label = f"training run {run.name} at max runtime" + (" (managed spot)" if run.spot else "")
        itype = run.instance_type or "<set at run time>"
        if run.instance_type is None:
            problem = f"training {run.name}: the instance type is chosen at run time; cannot price it"
            result.lines.append(Line(key, label, itype, run.instance_count, run.max_runtime_hours, None, None,
                                     problem=problem))
            continue
        try:
            unit = table.price("training", region, run.instance_type, f"training {run.name}")
        except UnpricedError as err:
            result.lines.append(Line(key, label, itype, run.instance_count, run.max_runtime_hours, None, None,
                                     problem=str(err)))
            continue
        hourly = unit * run.instance_count
        ceiling = hourly * run.max_runtime_hours
        if run.spot:
            spot_total = ceiling * (1 - table.spot_savings)
            note = f"spot estimate at {table.spot_savings:.0%} saving (assumption); on-demand ceiling ${ceiling:,.2f}"
            result.lines.append(Line(key, label, itype, run.instance_count, run.max_runtime_hours, hourly,
                                     spot_total, note=note))
        else:
            result.lines.append(Line(key, label, itype, run.instance_count, run.max_runtime_hours, hourly, ceiling))
    return result


# ---------------------------------------------------------------------------------------------- config
def _stack_id(config: Any, unit: str) -> str:
    return config.stack_id(unit) if hasattr(config, "stack_id") else unit


def workload_from_config(config: Any) -> Workload:
    """Endpoints and training runs of a loaded AppConfig (duck-typed: older configs may lack sections)."""
    endpoints: list[Endpoint] = []
    serving = getattr(config, "serving", None)
    if serving is not None:
        scaling = getattr(serving, "autoscaling", None)
        initial = serving.initial_instance_count
        low = scaling.min_capacity if scaling is not None else initial
        high = scaling.max_capacity if scaling is not None else initial
        endpoints.append(Endpoint(_stack_id(config, "Serving"), serving.instance_type, low, high))
    trainings: list[TrainingRun] = []
    training = getattr(config, "training", None)
    if training is not None:
        trainings.append(TrainingRun(_stack_id(config, "Training"), training.instance_type, training.instance_count,
                                     float(training.max_runtime_hours), bool(training.spot)))
    return Workload(getattr(config, "region", None), tuple(endpoints), tuple(trainings))


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
        (lid, res.get("Properties", {})) for lid, res in sorted(resources.items())
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


def _walk(node: Any):
    if isinstance(node, dict):
        yield node
        for value in node.values():
            yield from _walk(value)
    elif isinstance(node, list):
        for value in node:
            yield from _walk(value)


def _trainings_of(stack: str, template: dict) -> list[TrainingRun]:
    runs = []
    for lid, res in sorted(_resources(template).items()):
        if res.get("Type") != "AWS::StepFunctions::StateMachine":
            continue
        text = _definition_text(res.get("Properties", {}))
        if not text or "ResourceConfig" not in text:
            continue
        try:
            definition = json.loads(text)
        except json.JSONDecodeError:
            definition = None
        jobs = []
        if definition is not None:
            jobs = [node for node in _walk(definition) if isinstance(node.get("ResourceConfig"), dict)]
        else:  # a token outside a string: fall back to the literal fields
            match = re.search(r'"InstanceType"\s*:\s*"([^"]+)"', text)
            count = re.search(r'"InstanceCount"\s*:\s*(\d+)', text)
            runtime = re.search(r'"MaxRuntimeInSeconds"\s*:\s*(\d+)', text)
            spot = re.search(r'"EnableManagedSpotTraining"\s*:\s*true', text)
            jobs = [{
                "ResourceConfig": {"InstanceType": match.group(1) if match else None,
                                   "InstanceCount": int(count.group(1)) if count else 1},
                "StoppingCondition": {"MaxRuntimeInSeconds": int(runtime.group(1)) if runtime else 86400},
                "EnableManagedSpotTraining": bool(spot),
            }]
        for index, job in enumerate(jobs):
            resource = job["ResourceConfig"]
            itype = resource.get("InstanceType")
            stopping = job.get("StoppingCondition") or {}
            seconds = _int(stopping.get("MaxRuntimeInSeconds"), 86400)
            name = f"{stack}/{lid}" + (f"#{index + 1}" if len(jobs) > 1 else "")
            runs.append(TrainingRun(
                name, itype if isinstance(itype, str) and itype.startswith("ml.") else None,
                _int(resource.get("InstanceCount"), 1), seconds / 3600, job.get("EnableManagedSpotTraining") is True,
            ))
    return runs


def workload_from_templates(templates: dict[str, dict], region: str | None = None) -> Workload:
    """Endpoints (EndpointConfig variants + their scalable targets) and training jobs (state machines)."""
    endpoints: list[Endpoint] = []
    trainings: list[TrainingRun] = []
    for stack in sorted(templates):
        endpoints += _endpoints_of(stack, templates[stack])
        trainings += _trainings_of(stack, templates[stack])
    return Workload(region, tuple(endpoints), tuple(trainings))


# -------------------------------------------------------------------------------------------- output
def money(value: float | None) -> str:
    return "n/a" if value is None else f"${value:,.2f}"


def render_text(title: str, result: Estimate, table: PriceTable) -> str:
    where = result.region + (f" ({result.region_note})" if result.region_note else "")
    lines = [
        f"{title}: SageMaker on-demand, {where}, tools/prices.json as of {table.as_of}, "
        f"{table.hours_per_month:g} h/month",
    ]
    rows = [("item", "type", "count", "USD/hour", "USD total")]
    for line in result.lines:
        total = money(line.usd_total) + ("/month" if line.hours is None else f" per run ({line.hours:g} h)")
        rows.append((line.label, line.instance_type, str(line.count), money(line.usd_per_hour), total))
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    for row in rows:
        lines.append("  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip())
    lines += [f"  note: {line.label}: {line.note}" for line in result.lines if line.note]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--env", default="dev")
    parser.add_argument("--config-dir", default="config")
    parser.add_argument("--prices", default=str(PRICES))
    args = parser.parse_args(argv)
    sys.path.insert(0, str(ROOT))
    from stacks.config import ConfigError, load_config

    try:
        config = load_config(args.env, args.config_dir)
    except ConfigError as err:
        print(f"config error: {err}", file=sys.stderr)
        return 2
    table = PriceTable.load(Path(args.prices))
    result = estimate(workload_from_config(config), table)
    print(render_text(f"{config.app_name} {config.env_name}", result, table))
    if result.problems:
        print(f"cost error: {result.problems[0]}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
