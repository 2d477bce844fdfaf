"""The cheapest serving profile the synth accepts for a base model, found by running the synth's own rules.

Each candidate (stacks/config/profile.py proposes them) is written into the environment's YAML value in memory and
validated as the synth validates config/<env>.yaml: parse_environment (every section's rules, the compile step's
host) and check_trained_model (the base's facts against the profile). No rule is restated here: a candidate is
accepted exactly when the synth would accept the file it becomes.

Order: the serving type's price per hour; on the cheapest type with a passing candidate, each TP degree the backend
runs with its first passing shape and cheapest passing compile host, then the cheapest compile host, then the larger
TP (the cores paid for). Compile hosts: the kind the backend's compile step names (CompileStep.host_kind: ml.trn1 for
LMI NeuronX's partition, which loads the model onto NeuronCores; CPU types for vLLM Neuron's export); priced ones by
price, then the others by host memory. No candidate passing: NoProfile, one line: the synth's refusal when every
candidate that reached the model checks (two or more) got the same one, which is then the model's whatever the profile
(an architecture the backend does not load), else the refusal of the candidate that got furthest (into the model
checks rather than refused while parsing; then the most NeuronCores and TP).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..serving.backends import backend as backend_named
from ..serving.backends import backends
from .app_config import AppConfig
from .errors import ConfigError
from .hosts import TRAINING_HOSTS
from .inf2 import INF2_TYPES
from .loader import parse_environment
from .model_catalog import MODEL_ID, BaseModel, TrainingBase, check_gated_access, read_catalog, training_base
from .profile import COMPILE_TYPE, Changes, Profile, Shape, applied, changes_for, model_values, profile_for, shapes
from .profile import profile_values as values_of
from .schema import parse
from .trained_model import check_trained_model
from .training import TrainingConfig
from .trn1 import INF2_TP_DEGREES

UNPRICED = float("inf")


@dataclass(frozen=True)
class Target:
    """The environment a profile is checked in: its YAML value, its file (what lines name), config/."""

    raw: Mapping[str, Any]
    source: str
    config_dir: Path


@dataclass(frozen=True)
class Prices:
    """USD per instance-hour: SageMaker real-time inference and training (tools/prices.json)."""

    serving: Mapping[str, float]
    training: Mapping[str, float]


@dataclass(frozen=True)
class Derived:
    profile: Profile
    changes: Changes
    config: AppConfig
    access: str | None = None  # the loader's line for a gated base the environment cannot yet download


class NoProfile(Exception):
    """No candidate passes the synth; the message is one line."""


@dataclass(frozen=True)
class _Refusal:
    rank: tuple[int, int, int]  # (stage: 1 parsing, 2 model checks; NeuronCores; TP)
    error: ConfigError
    where: str


def tp_degrees(backend: str) -> tuple[int, ...]:
    """The backend's own TP degrees, else every degree the Neuron runtime runs on Inf2."""
    return backend_named(backend).tensor_parallel_degrees or INF2_TP_DEGREES


def _compile_types(raw: Mapping[str, Any], backend: str, prices: Mapping[str, float]) -> list[str | None]:
    compile_step = ((raw.get("training") or {}).get("neuron_compile")) or {}
    if compile_step.get("enabled") is False:
        return [None]
    step = backend_named(backend).compile
    kind = step.host_kind if step is not None else None
    names = [name for name, host in TRAINING_HOSTS.items() if kind is None or host.kind == kind]
    return sorted(names, key=lambda n: (prices.get(n, UNPRICED), TRAINING_HOSTS[n].host_memory_gib, n))


class _Search:
    def __init__(self, target: Target, base: BaseModel, backend: str, prices: Prices) -> None:
        self.target, self.base, self.backend, self.prices = target, base, backend, prices
        self.catalog = read_catalog(target.config_dir)
        current = training_base(target.raw.get("training"), self.catalog)
        hub_id = current.model.record.hub_id if current.model is not None else current.value
        self.model = model_values(target.raw, base.name, base.record, hub_id)
        self.others = [b.section for b in backends().values() if b.section and b.name != backend]
        self.compile_types = _compile_types(target.raw, backend, prices.training)
        self.compile_start: dict[int, int] = {}  # TP -> first compile host not refused for its memory or cores
        self.furthest: _Refusal | None = None
        self.checked: dict[str, set[str]] = {}  # line -> candidates refused by it in the model checks

    def access_line(self) -> str | None:
        """The loader's refusal of a gated base the environment would download with no token
        (model_catalog.check_gated_access): no serving profile changes it, so the search leaves it out and the
        profile carries the line."""
        hub_id = self.model.get(MODEL_ID)
        if not isinstance(hub_id, str):
            return None
        raw_training = self.target.raw.get("training") or {}
        try:
            training = parse(TrainingConfig, raw_training, source=self.target.source, path="training")
            check_gated_access(TrainingBase(MODEL_ID, hub_id, self.base), training, self.target.source)
        except ConfigError as error:
            return str(error)
        return None

    def attempt(self, profile: Profile) -> Derived | tuple[int, ConfigError]:
        changes = changes_for(self.target.raw, {**self.model, **values_of(profile)}, self.backend, self.others)
        try:
            raw = applied(self.target.raw, changes)
            config = parse_environment(
                raw, self.target.source, self.target.config_dir, self.catalog, check_access=False
            )
        except ConfigError as error:
            return 1, error
        try:
            check_trained_model(config)
        except ConfigError as error:
            return 2, error
        return Derived(profile, changes, config)

    def shaped(self, instance_type: str, tp: int, shape: Shape) -> Derived | tuple[int, ConfigError]:
        """The cheapest compile host that passes for this candidate, or the refusal that is not the host's."""
        outcome: Derived | tuple[int, ConfigError] = 1, ConfigError(self.target.source, COMPILE_TYPE, "none tried")
        start = self.compile_start.get(tp, 0)
        for index, compile_type in enumerate(self.compile_types[start:], start):
            record = self.base.record
            outcome = self.attempt(profile_for(record, self.backend, instance_type, tp, shape, compile_type))
            if isinstance(outcome, Derived) or outcome[1].field != COMPILE_TYPE:
                self.compile_start[tp] = index
                return outcome
        return outcome

    def on_type(self, instance_type: str) -> list[Derived]:
        cores = INF2_TYPES[instance_type].neuron_cores
        found = []
        for tp in (d for d in tp_degrees(self.backend) if d <= cores):
            for shape in shapes(self.base.record):
                outcome = self.shaped(instance_type, tp, shape)
                if isinstance(outcome, Derived):
                    found.append(outcome)
                    break
                refusal = _Refusal((outcome[0], cores, tp), outcome[1], f"{instance_type} at TP {tp}")
                if outcome[0] == 2:
                    self.checked.setdefault(str(outcome[1]), set()).add(refusal.where)
                if self.furthest is None or refusal.rank >= self.furthest.rank:
                    self.furthest = refusal
        return found

    def compile_price(self, derived: Derived) -> float:
        compile_type = derived.profile.compile_instance_type
        return 0.0 if compile_type is None else self.prices.training.get(compile_type, UNPRICED)


def derive(target: Target, base: BaseModel, backend: str, prices: Prices) -> Derived:
    """The cheapest profile for `base` on `backend` that the synth accepts in `target` (NoProfile otherwise)."""
    search = _Search(target, base, backend, prices)
    for instance_type in sorted(INF2_TYPES, key=lambda n: (prices.serving.get(n, UNPRICED), n)):
        found = search.on_type(instance_type)
        if found:
            best = min(found, key=lambda d: (search.compile_price(d), -d.profile.tensor_parallel))
            return dataclasses.replace(best, access=search.access_line())
    furthest = search.furthest
    lines = list(search.checked.items())
    if len(lines) == 1 and len(lines[0][1]) > 1:  # one line for every profile that reached the model: the model's
        raise NoProfile(lines[0][0])
    degrees = ", ".join(map(str, tp_degrees(backend)))
    raise NoProfile(
        f"{base.record.hub_id} on {backend}: no ml.inf2 profile passes the synth (TP {degrees} on every ml.inf2 "
        f"type); the nearest, {furthest.where}, is refused: {furthest.error}"
    )
