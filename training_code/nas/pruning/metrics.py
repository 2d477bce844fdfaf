"""Metric log lines and the SageMaker regexes that parse them (standard library only).

The CDK stacks import ``METRIC_DEFINITIONS`` at synth time; the jobs print lines with ``format_metrics``.
Keeping both in one module means a renamed metric cannot break the tuning job's objective silently.
"""

from __future__ import annotations

import math
import re

_NUMBER = r"([-+]?(?:[0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?|nan|inf))"

METRIC_DEFINITIONS = [
    {"Name": name, "Regex": rf"(?:^|[\s;]){name}={_NUMBER}"}
    for name in ("epoch", "train_loss", "num_parameters", "validation_error", "latency_ms", "macs")
]


def _format_value(value: float | int) -> str:
    if isinstance(value, bool):
        raise TypeError("booleans are not metrics")
    if isinstance(value, int):
        return str(value)
    if math.isnan(value) or math.isinf(value):
        return str(value)
    return f"{value:.6g}"


def format_metrics(**metrics: float | int) -> str:
    """One log line such as ``epoch=1; train_loss=0.61; validation_error=0.3``."""
    unknown = set(metrics) - {d["Name"] for d in METRIC_DEFINITIONS}
    if unknown:
        raise ValueError(f"metrics without a regex: {sorted(unknown)}")
    return "; ".join(f"{name}={_format_value(value)}" for name, value in metrics.items())


def parse_metrics(line: str) -> dict[str, float]:
    """What SageMaker would extract from ``line`` with ``METRIC_DEFINITIONS`` (first match of each)."""
    found = {}
    for definition in METRIC_DEFINITIONS:
        match = re.search(definition["Regex"], line)
        if match:
            found[definition["Name"]] = float(match.group(1))
    return found
