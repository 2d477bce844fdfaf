"""A job's metrics as SageMaker reads them from its log: each MetricDefinitions regex, last value, float32."""

from __future__ import annotations

import re
import struct
from collections.abc import Mapping


def float32(value: float) -> float:
    """SageMaker keeps metric values as 32-bit floats."""
    return struct.unpack("f", struct.pack("f", value))[0]


def parse_metrics(lines: list[str], definitions: list[Mapping[str, str]]) -> dict[str, float]:
    """The last value each MetricDefinitions regex (first group) finds in the log, as float32."""
    found: dict[str, float] = {}
    for definition in definitions:
        pattern = re.compile(definition["Regex"])
        for line in lines:
            for match in pattern.finditer(line):
                try:
                    found[definition["Name"]] = float32(float(match.group(1)))
                except (ValueError, IndexError):
                    continue
    return found
