"""The command line: exit 0 a profile (written with --env), 2 refused (one stderr line, nothing written)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from stacks.config.errors import ConfigError
from stacks.config.model_catalog import BaseModel, read_catalog
from stacks.config.profile_search import NoProfile, Prices, Target, derive
from stacks.config.yaml_file import read_yaml
from stacks.paths import CONFIG_DIR
from stacks.serving.backends import names
from tools.cost.prices import PRICES, PriceTable
from tools.profile.render import qlora_fit, render_profile
from tools.profile.write import WriteRefused, served_note, write_profile

DESCRIPTION = "The cheapest serving profile the synth accepts for a recorded base model (--env: write it there)."
# Without --env a profile is checked in the environment that ships the backend.
TEMPLATES = {"lmi_neuronx": "dev", "vllm_neuronx": "staging"}


class Refused(Exception):
    """One line: why no profile is printed or written."""


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


def price_book(table: PriceTable) -> Prices:
    region = table.data["regions"][table.default_region]
    return Prices(serving=region["inference"], training=region["training"])


def find_record(model: str, config_dir: Path) -> BaseModel:
    """The record whose file name or hub id is `model`."""
    for name, base in read_catalog(config_dir).items():
        if model in (name, base.record.hub_id):
            return base
    raise Refused(
        f"no record of {model} in config/models/, so nothing says what it is: run `make base-model MODEL={model}` "
        "and commit the record it writes"
    )


def read_target(config_dir: Path, env: str) -> Target:
    path = config_dir / f"{env}.yaml"
    if not path.is_file():
        known = ", ".join(sorted(p.stem for p in config_dir.glob("*.yaml"))) or "none"
        raise Refused(f"no config/{env}.yaml; known environments: {known}")
    return Target(raw=read_yaml(path) or {}, source=f"config/{env}.yaml", config_dir=config_dir)


def run(args: argparse.Namespace, table: PriceTable) -> int:
    prices = price_book(table)
    base = find_record(args.model, args.config_dir)
    target = read_target(args.config_dir, args.env or TEMPLATES[args.backend])
    derived = derive(target, base, args.backend, prices)
    fit = qlora_fit(base.record, derived, prices)
    if args.env:
        write_profile(args.config_dir, args.env, derived)
    print(render_profile(base.record, derived, fit, prices, table.hours_per_month))
    if args.env:
        print(f"config/{args.env}.yaml: written; review the diff (git diff config/{args.env}.yaml)")
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
