"""The printed estimate: the table of lines, the totals, and what the figures leave out."""

from __future__ import annotations

from tools.cost.model import Estimate, Line
from tools.cost.prices import PriceTable

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


def money(value: float | None) -> str:
    return "n/a" if value is None else f"${value:,.2f}"


def rate(value: float | None) -> str:
    """An hourly price as the table has it (up to 4 decimals): $0.115, not a rounded $0.12."""
    if value is None:
        return "n/a"
    text = f"{value:,.4f}".rstrip("0")
    return f"${text}{'0' * max(0, 2 - len(text.split('.')[1]))}"


def render_text(title: str, result: Estimate, table: PriceTable) -> str:
    """The estimate as aligned columns, then each line's note."""
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
