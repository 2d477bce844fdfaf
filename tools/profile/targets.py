"""What a profile is derived from: the model's record, the environment it is checked in, the price table."""

from __future__ import annotations

from pathlib import Path

from stacks.config.model_catalog import BaseModel, read_catalog
from stacks.config.profile_search import Prices, Target
from stacks.config.yaml_file import read_yaml
from tools.cost.prices import PriceTable

# Without --env a profile is checked in the environment that ships the backend.
TEMPLATES = {"lmi_neuronx": "dev", "vllm_neuronx": "staging"}


class Refused(Exception):
    """One line: why no profile is printed or written."""


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
