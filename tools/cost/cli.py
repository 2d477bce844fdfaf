"""The command line: price every stack of a cloud assembly, print the lines, the totals and the caveats."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from local.cloud_assembly import CloudAssemblyReader
from tools.cost.estimate import estimate_stacks
from tools.cost.prices import PRICES, PriceTable
from tools.cost.report import ASSUMPTIONS, LEFT_OUT, SCOPE, render_text, totals_text

DESCRIPTION = (
    "What an environment costs, from its synthesized templates and the committed price table (tools/prices.json)."
)


def main(argv: list[str] | None = None) -> int:
    """0 priced; 1 a type without a price (the priced lines are printed first); 2 no cloud assembly."""
    parser = argparse.ArgumentParser(prog="python -m tools.cost", description=DESCRIPTION)
    parser.add_argument("--cdk-out", default="cdk.out", help="a synthesized cloud assembly (make synth ENV=...)")
    parser.add_argument("--prices", default=str(PRICES))
    args = parser.parse_args(argv)
    if not (Path(args.cdk_out) / "manifest.json").is_file():
        print(f"cost error: {args.cdk_out} is no cloud assembly; run make synth ENV=<env> first", file=sys.stderr)
        return 2
    stacks = CloudAssemblyReader(args.cdk_out).by_name()
    table = PriceTable.load(Path(args.prices))
    title = os.path.commonprefix(sorted(stacks)).rstrip("-") or args.cdk_out
    problems: list[str] = []
    for result in estimate_stacks(stacks, table):
        print(render_text(title, result, table))
        print(totals_text(result))
        problems += result.problems
    for line in (SCOPE, LEFT_OUT, ASSUMPTIONS):
        print(line)
    print(f"{table.recheck}")
    if problems:
        print(f"cost error: {problems[0]}", file=sys.stderr)
        return 1
    return 0
