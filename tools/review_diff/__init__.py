"""Review summary of an infrastructure change: what a merge would add, change, replace or delete in AWS.

    python -m tools.review_diff --base origin/main [--env dev --env prod] [--output review.md]
    python -m tools.review_diff --base-dir cdk.out.base --head-dir cdk.out [--output review.md]

`--base REF` checks REF out into a temporary `git worktree`, synthesizes it and the working tree
offline (`python app.py` with CDK_OUTDIR / CDK_CONTEXT_JSON, one process per environment, no
credentials), then compares every stack. `--base-dir/--head-dir` compare two synthesized cloud
assemblies (a folder with manifest.json, or a folder of such folders, one per environment).

Every stack pair goes through @aws-cdk/cloudformation-diff (tools/cfn_diff.cjs), the engine of
`cdk diff --template`, pinned in package.json: its per-resource change impact (WILL_REPLACE,
MAY_REPLACE, WILL_DESTROY, WILL_ORPHAN), computed from the CloudFormation resource specification it
ships, is the replacement detection. On top of it this tool adds what the engine cannot see: a
renamed construct (same type removed and added under a new logical ID, i.e. a new, empty resource)
and what an endpoint update means for clients. The markdown is deterministic: sorted, no times, no
temporary paths.
"""

from tools.review_diff.assembly import read_assembly
from tools.review_diff.classify import analyse, stack_settings
from tools.review_diff.cli import main
from tools.review_diff.cost_delta import aws_environments, cost_delta, environment_costs, totals_table
from tools.review_diff.exports import exports_in_use
from tools.review_diff.markdown import MARKER, render
from tools.review_diff.model import Analysis, Kind, Review, ReviewError, ReviewWarning, Severity, StackReport
from tools.review_diff.summary import review
from tools.review_diff.synth import synth_tree
from tools.review_diff.worktree import synth_ref

__all__ = [
    "MARKER",
    "Analysis",
    "Kind",
    "Review",
    "ReviewError",
    "ReviewWarning",
    "Severity",
    "StackReport",
    "analyse",
    "aws_environments",
    "cost_delta",
    "environment_costs",
    "exports_in_use",
    "main",
    "read_assembly",
    "render",
    "review",
    "stack_settings",
    "synth_ref",
    "synth_tree",
    "totals_table",
]
