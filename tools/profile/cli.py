"""The command line: exit 0 a profile (written with --env), 2 refused (one stderr line, nothing written)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from stacks.config.errors import ConfigError
from stacks.config.profile_search import NoProfile, derive
from stacks.paths import CONFIG_DIR
from stacks.serving.backends import names
from tools.cost.prices import PRICES, PriceTable
from tools.profile.render import qlora_fit, render_profile
from tools.profile.targets import TEMPLATES, Refused, find_record, price_book, read_target
from tools.profile.write import WriteRefused, served_note, write_profile

DESCRIPTION = "The cheapest serving profile the synth accepts for a recorded base model (--env: write it there)."


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m tools.profile", description=DESCRIPTION)
    parser.add_argument("--model", help="a record's name (config/models/<name>.yaml) or its hub id")
    parser.add_argument("--backend", choices=names(), help="the serving backend")
    parser.add_argument("--env", help="write the profile and the model into config/<env>.yaml")
    parser.add_argument("--table", action="store_true", help="the models x backends table (markdown)")
    parser.add_argument("--configs", type=Path, help="--table: also the models of each <folder>/config.json")
    parser.add_argument("--config-dir", type=Path, default=CONFIG_DIR)
    parser.add_argument("--prices", type=Path, default=PRICES)
    return parser


def run(args: argparse.Namespace, table: PriceTable) -> int:
    prices = price_book(table)
    base = find_record(args.model, args.config_dir)
    target = read_target(args.config_dir, args.env or TEMPLATES[args.backend])
    derived = derive(target, base, args.backend, prices)
    fit = qlora_fit(base.record, derived, prices)
    commented = write_profile(args.config_dir, args.env, derived) if args.env else []
    print(render_profile(base.record, derived, fit, prices, table.hours_per_month))
    if derived.access is not None and not args.env:
        print(f"before training: {derived.access}")
    if args.env:
        print(f"config/{args.env}.yaml: written; review the diff (git diff config/{args.env}.yaml)")
        if commented:
            shown = ", ".join(f"config/{args.env}.yaml:{n}" for n in commented)
            print(f"note: comments kept on changed lines, written for the old values; check they still hold: {shown}")
        note = served_note(args.config_dir, args.env)
        if note:
            print(note)
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    table = PriceTable.load(args.prices)
    try:
        if args.table:
            from tools.profile.table import render_table

            print(render_table(args.config_dir, args.configs, table), end="")
            return 0
        if not args.model or not args.backend:
            parser.error("--model and --backend are required (or --table)")
        return run(args, table)
    except (Refused, NoProfile, ConfigError, WriteRefused) as err:
        print(f"make profile: {' '.join(str(err).split())}", file=sys.stderr)
        return 2
