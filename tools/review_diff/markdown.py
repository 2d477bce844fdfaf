"""The review as deterministic markdown (sorted, no times, no temporary paths), sized for a PR comment."""

from __future__ import annotations

from tools import cost
from tools.review_diff.cost_delta import totals_table
from tools.review_diff.model import Review, Severity, StackReport

MARKER = "<!-- review-diff -->"  # how the workflow finds its own comment to update
HEADINGS = {
    Severity.BLOCKING: ":no_entry: {n} blocking: the deploy fails or needs a manual step",
    Severity.ATTENTION: ":warning: {n} stateful or user-facing resource(s) replaced or deleted",
    Severity.ROUTINE: "{n} routine rollout(s) the stack manages",
}
Block = list[str]  # a collapsible <details> section, left out whole when the comment would be too long


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def _table(rows: list[list[str]]) -> list[str]:
    """A markdown table from the engine's summary rows (first row: header)."""
    header = "| " + " | ".join(_cell(c) or " " for c in rows[0]) + " |"
    return [header, "|" + " --- |" * len(rows[0])] + [
        "| " + " | ".join(_cell(c).replace("\n", "<br>") for c in row) + " |" for row in rows[1:]
    ]


def _details(summary: str, body: list[str]) -> Block:
    return [f"<details><summary>{summary}</summary>", "", *body, "", "</details>", ""]


def _warnings(result: Review, changed: list[StackReport]) -> list[str]:
    """The warnings grouped by severity, worst first, and what was not found."""
    out = []
    for severity in Severity:
        group = [w for w in result.warnings if w.severity == severity]
        if group:
            out += [f"### {HEADINGS[severity].format(n=len(group))}", ""]
            out += [f"- **{w.kind}** `{w.stack}` `{w.logical_id}` ({w.type}): {w.message}" for w in group] + [""]
    if changed and not result.blocking:
        out += ["Nothing blocking: no deploy failure or manual step found.", ""]
    if changed and not [w for w in result.warnings if w.severity != Severity.ROUTINE]:
        out += ["No stateful or user-facing resource is replaced or deleted.", ""]
    return out


def _stacks(result: Review) -> list[str]:
    out = ["| Stack | Status | Added | Changed | Removed | Replaced |", "| --- | --- | --- | --- | --- | --- |"]
    for s in result.stacks:
        replaced = ", ".join(f"`{c['logicalId']}`" for c in s.replaced) or "-"
        out.append(f"| `{s.name}` | {s.status} | {len(s.added)} | {len(s.changed)} | {len(s.removed)} | {replaced} |")
    return out + [""]


def _iam(result: Review) -> tuple[list[str], list[Block]]:
    """The IAM lines, and each stack's statement and managed-policy tables as details."""
    if not (result.iam or any(s.iam.get("changed") for s in result.stacks)):
        return [], []
    out = ["### IAM changes", ""]
    if any(s.iam.get("broadened") for s in result.stacks):
        out += ["**Permissions are broadened** (new allow statements or managed policies).", ""]
    out += [f"- {line}" for line in result.iam] + [""]
    details = []
    for s in result.stacks:
        for caption, rows in (
            ("IAM statements", s.iam.get("statements", [])),
            ("managed policies", s.iam.get("managedPolicies", [])),
        ):
            if len(rows) > 1:
                details.append(_details(f"<code>{s.name}</code>: {caption}", _table(rows)))
    return out, details


def _security_groups(result: Review) -> tuple[list[str], list[Block]]:
    if not (result.security or any(s.security_groups.get("changed") for s in result.stacks)):
        return [], []
    out = ["### Security-group changes", ""] + [f"- {line}" for line in result.security] + [""]
    details = []
    for s in result.stacks:
        rows = s.security_groups.get("rules", [])
        if len(rows) > 1:
            details.append(_details(f"<code>{s.name}</code>: security-group rules", _table(rows)))
    return out, details


def _cost(result: Review, table: cost.PriceTable) -> list[str]:
    """The priced items that change, then each environment's totals, then the notes."""
    out = [
        f"### Cost (on-demand: SageMaker, PrivateLink; what changes, then each environment's totals; "
        f"tools/prices.json as of {table.as_of}, {table.hours_per_month:g} h/month)",
        "",
    ]
    if result.cost_rows:
        out += ["| Item | Instances | Base | Head | Delta |", "| --- | --- | --- | --- | --- |"]
        out += ["| " + " | ".join(_cell(c) for c in row) + " |" for row in result.cost_rows]
        out.append("")
    elif result.cost_totals:
        out += ["No priced item changes.", ""]
    if result.cost_totals:
        out += totals_table(result.cost_totals) + [""]
    else:
        out += ["No endpoint or training job in either side.", ""]
    return out + [f"- {note}" for note in result.cost_notes] + ([""] if result.cost_notes else [])


def _fitted(out: list[str], details: list[Block], footer: str, max_chars: int) -> list[str]:
    """The details that fit under max_chars, in order, and one line naming those left out."""
    used = sum(len(line) + 1 for line in out) + len(footer) + 200
    kept, left_out = [], []
    for block in details:
        size = sum(len(line) + 1 for line in block)
        if max_chars and used + size > max_chars:
            left_out.append(block[0].removeprefix("<details><summary>").removesuffix("</summary>"))
            continue
        kept += block
        used += size
    if left_out:
        kept += [
            f"Left out to stay under {max_chars:,} characters (run `make review` for everything): "
            + "; ".join(left_out),
            "",
        ]
    return kept


def render(result: Review, table: cost.PriceTable | None = None, max_chars: int = 60000) -> str:
    """Markdown; the collapsible details are left out beyond max_chars (GitHub comments hold 65,536)."""
    table = table or cost.PriceTable.load()
    changed = [s for s in result.stacks if s.status != "unchanged"]
    out = [MARKER, f"## Infrastructure review: {result.title}", ""]
    if not changed:
        out += ["No infrastructure changes: every stack template is identical.", ""]
    out += _warnings(result, changed)
    if changed:
        out += _stacks(result)
    if result.settings:
        out += ["### Stack settings", ""] + [f"- {line}" for line in result.settings] + [""]
    iam, iam_details = _iam(result)
    security, security_details = _security_groups(result)
    out += iam + security + _cost(result, table)
    diffs = [
        _details(f"<code>{s.name}</code>: cdk diff", ["```diff", s.text.rstrip(), "```"])
        for s in changed
        if s.text.strip()
    ]
    footer = f"<sub>Diff engine: {result.engine} (the engine of `cdk diff --template`).</sub>"
    out += _fitted(out, iam_details + security_details + diffs, footer, max_chars)
    return "\n".join([*out, footer]) + "\n"
