"""What `make profile` prints: the profile's lines with their prices, the QLoRA host, the synth's warnings."""

from __future__ import annotations

from dataclasses import dataclass

from stacks.config.base_model_record import BaseModelRecord
from stacks.config.hosts import TRAINING_HOSTS
from stacks.config.profile import Profile
from stacks.config.profile_search import Derived, Prices
from stacks.config.qlora_fit import QloraNeed, cheapest_fit, qlora_need


@dataclass(frozen=True)
class Fit:
    """The QLoRA run's needs and the cheapest GPU training type that meets them (None: none priced does)."""

    need: QloraNeed
    instance_type: str | None


def qlora_fit(record: BaseModelRecord, derived: Derived, prices: Prices) -> Fit:
    need = qlora_need(record, derived.config.training.hyperparameters)
    return Fit(need, cheapest_fit(need, prices.training))


def money(value: float) -> str:
    return f"${value:,.2f}"


def hourly(price: float) -> str:
    return f"${price:g}/h"


def fit_text(fit: Fit, prices: Prices) -> str:
    need = f"~{fit.need.gpu_gib:.1f} GiB per GPU, ~{fit.need.host_gib:.1f} GiB host RAM for the merge"
    if fit.instance_type is None:
        return f"none of tools/prices.json's GPU training types holds it ({need}); FSDP (fsdp: true) shards it"
    host = TRAINING_HOSTS[fit.instance_type]
    return (
        f"{fit.instance_type} ({hourly(prices.training[fit.instance_type])}): {need} "
        f"(it has {host.gpu_memory_gib} GiB per GPU, {host.host_memory_gib} GiB)"
    )


def _annotation(key: str, value: object, prices: Prices, hours_per_month: float) -> str:
    if key == "serving.instance_type":
        price = prices.serving[str(value)]
        return f"{hourly(price)}, {money(price * hours_per_month)}/month per instance ({hours_per_month:g} h)"
    if key == "training.neuron_compile.instance_type":
        price = prices.training.get(str(value))
        return f"{hourly(price)} while the compile step runs" if price is not None else "no price in tools/prices.json"
    return ""


def render_profile(record: BaseModelRecord, derived: Derived, fit: Fit, prices: Prices, hours_per_month: float) -> str:
    """The profile as the lines it sets in the environment (`key: value  price`), then what it removes, the QLoRA
    training type and the synth's warnings."""
    profile = derived.profile
    config = derived.config
    lines = [f"{record.hub_id} on {profile.backend}: the cheapest profile the synth accepts in {config.source}"]
    values = derived.changes.values
    width = max(len(f"{key}: {value}") for key, value in values.items())
    for key, value in values.items():
        note = _annotation(key, value, prices, hours_per_month)
        lines.append(f"  {f'{key}: {value}':<{width}}  {note}".rstrip())
    if derived.changes.removed:
        lines.append(f"  removed: {', '.join(derived.changes.removed)} (another backend's settings)")
    lines.append(f"QLoRA training: {fit_text(fit, prices)}")
    lines += [f"synth warning: {line}" for line in config.warnings()]
    return "\n".join(lines)


def summary(profile: Profile) -> str:
    """One table cell: the variant, its shape and the compile host."""
    compile_host = profile.compile_instance_type or "compile step off"
    shape = f"batch {profile.shape.batch_size} x {profile.shape.sequence_length}"
    return f"{profile.instance_type}, TP {profile.tensor_parallel}, {shape}, compile on {compile_host}"
