"""Isolated mode's placement of SageMaker jobs and models, handed from the Network stack (or config) to the others."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Placement:
    """Where SageMaker jobs and models run in isolated mode (tokens when the Network stack creates them)."""

    subnet_ids: Sequence[str]
    security_group_ids: Sequence[str]
