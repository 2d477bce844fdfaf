"""The cost side of a change: the priced items that change, and each environment's totals before and after."""

from __future__ import annotations

from pathlib import Path

from local.cloud_assembly import StackArtifact
from tools import cost
from tools.review_diff.assembly import stack_env
from tools.review_diff.model import EnvironmentCost

ROOT = Path(__file__).resolve().parents[2]
TOTALS = (
    ("min", "/month", "always-on at min scale"),
    ("max", "/month", "always-on at max scale"),
    ("run", "/run", "one execution of every workflow at its bound"),
)


def _delta(old: float | None, new: float | None, unit: str) -> str:
    if old is None or new is None:
        return "n/a"
    diff = new - old
    return "±0" if abs(diff) < 0.005 else f"{'+' if diff > 0 else '-'}${abs(diff):,.2f}{unit}"


def aws_environments(config_dir: Path = ROOT / "config") -> set[str]:
    """The environments deploy.yml deploys (a deploy: section); the others run only on the emulator."""
    from stacks.config.loader import deployed_environments

    return set(deployed_environments(config_dir))


def _totals(side: dict[str, StackArtifact], table: cost.PriceTable) -> dict[str, float | None]:
    lines = [line for result in cost.estimate_stacks(side, table) for line in result.lines]
    parts = cost.total_lines(lines)
    return {part: cost.total(parts[part]) for part, _, _ in TOTALS}


def environment_costs(
    base: dict[str, StackArtifact], head: dict[str, StackArtifact], table: cost.PriceTable, aws: set[str]
) -> list[EnvironmentCost]:
    """Each environment's totals, base and head; environments outside `aws` are emulated (never billed)."""

    def of(side: dict[str, StackArtifact], env: str) -> dict[str, StackArtifact]:
        return {name: art for name, art in side.items() if stack_env(name) == env}

    envs = sorted({stack_env(name) for name in [*base, *head]})
    return [
        EnvironmentCost(env, env not in aws, _totals(of(base, env), table), _totals(of(head, env), table))
        for env in envs
    ]


def _usd(line: cost.Line | None, unit: str) -> str:
    if line is None:
        return "-"
    return "n/a" if line.usd_total is None else cost.money(line.usd_total) + unit


def _row(old: cost.Line | None, new: cost.Line | None) -> tuple[str, ...] | None:
    """(item, instances, base, head, delta) of one priced item; None when neither its type nor its price moves."""
    ref = new or old
    unit = "/month" if ref.hours is None else "/run"
    old_type = f"{old.count} x {old.instance_type}" if old else "-"
    new_type = f"{new.count} x {new.instance_type}" if new else "-"
    delta = _delta(old.usd_total if old else 0.0, new.usd_total if new else 0.0, unit)
    if old_type == new_type and delta == "±0":
        return None
    instances = old_type if old_type == new_type else f"{old_type} -> {new_type}"
    return (ref.label, instances, _usd(old, unit), _usd(new, unit), delta)


def _notes(*lines: cost.Line | None) -> set[str]:
    notes = set()
    for line in lines:
        if line and line.problem:
            notes.add(f"not priced: {line.problem}")
        if line and line.note:
            notes.add(f"{line.label}: {line.note}")
    return notes


def cost_delta(
    base: dict[str, StackArtifact], head: dict[str, StackArtifact], table: cost.PriceTable
) -> tuple[list[tuple[str, ...]], list[str]]:
    """The priced items that change (type, count or price); unchanged items are counted in a note."""

    def lines(side: dict[str, StackArtifact]) -> dict[str, cost.Line]:
        return {line.key: line for result in cost.estimate_stacks(side, table) for line in result.lines}

    before, after = lines(base), lines(head)
    rows: list[tuple[str, ...]] = []
    notes: set[str] = set()
    unchanged = 0
    for key in list(after) + [k for k in before if k not in after]:
        row = _row(before.get(key), after.get(key))
        if row is None:
            unchanged += 1
            continue
        rows.append(row)
        notes |= _notes(before.get(key), after.get(key))
    if unchanged:
        notes.add(f"{unchanged} unchanged item(s) not shown")
    return rows, sorted(notes)


def _total_cell(old: float | None, new: float | None, unit: str) -> str:
    delta = _delta(old, new, unit)
    shown = f"**{delta}**" if delta not in ("±0", "n/a") else delta
    return f"{cost.money(old)} -> {cost.money(new)}{unit} ({shown})"


def _sum_or_none(values: list[float | None]) -> float | None:
    return None if any(v is None for v in values) else sum(values)


def _totals_row(label: str, old: dict, new: dict) -> str:
    return f"| {label} | " + " | ".join(_total_cell(old[p], new[p], unit) for p, unit, _ in TOTALS) + " |"


def totals_table(totals: list[EnvironmentCost]) -> list[str]:
    """Per environment, base -> head (delta): the AWS ones and their sum, then the emulated ones apart."""
    out = ["| Environment | " + " | ".join(label.capitalize() for _, _, label in TOTALS) + " |"]
    out.append("|" + " --- |" * (len(TOTALS) + 1))
    billed = [t for t in totals if not t.emulated]
    out += [_totals_row(f"`{t.env}`", t.old, t.new) for t in billed]
    if billed:
        old = {p: _sum_or_none([t.old[p] for t in billed]) for p, _, _ in TOTALS}
        new = {p: _sum_or_none([t.new[p] for t in billed]) for p, _, _ in TOTALS}
        out.append(_totals_row("**AWS, all environments**", old, new))
    out += [
        _totals_row(f"`{t.env}` (emulated on one machine: never billed, not in the sum)", t.old, t.new)
        for t in totals
        if t.emulated
    ]
    return out
