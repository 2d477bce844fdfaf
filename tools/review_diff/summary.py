"""The whole review of two sides: the engine's diff, its classification, and the cost delta."""

from __future__ import annotations

from local.cloud_assembly import StackArtifact
from tools import cost
from tools.review_diff.classify import analyse, stack_settings
from tools.review_diff.cost_delta import aws_environments, cost_delta, environment_costs
from tools.review_diff.diff import run_engine
from tools.review_diff.model import Review


def review(
    base: dict[str, StackArtifact], head: dict[str, StackArtifact], title: str, table: cost.PriceTable | None = None
) -> Review:
    """What a merge of head over the deployed base would do, ready to render."""
    engine = run_engine(base, head)
    found = analyse(base, head, engine)
    table = table or cost.PriceTable.load()
    rows, notes = cost_delta(base, head, table)
    return Review(
        title,
        engine["engine"],
        found.stacks,
        found.warnings,
        found.iam,
        found.security,
        stack_settings(base, head),
        rows,
        notes,
        environment_costs(base, head, table, aws_environments()),
    )
