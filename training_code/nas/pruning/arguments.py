"""transformers' HfArgumentParser fitted to the command line SageMaker's training toolkit builds for these scripts
from a job's hyperparameters (`--dashed-name value`, every value a string); pruning.cli.settings_parser builds one
per script from its pruning.settings dataclass."""

from __future__ import annotations

import argparse
import dataclasses
import os

from transformers import HfArgumentParser


class _DashedFlag:
    """Passes HfArgumentParser's add_argument call on with the field's dashed flag only (HfArgumentParser adds the
    underscored twin too, which these scripts never had), the SM_* `environment` variable of its metadata as the
    default when set, and the metadata's `type` over the one HfArgumentParser derives from the annotation."""

    def __init__(self, container: argparse._ActionsContainer, field: dataclasses.Field) -> None:
        self._container = container
        self._field = field

    def add_argument(self, *flags: str, **kwargs) -> argparse.Action:
        variable = kwargs.pop("environment", None)
        if variable and variable in os.environ:
            kwargs["default"] = os.environ[variable]
        if "type" in self._field.metadata:
            kwargs["type"] = self._field.metadata["type"]
        container = self._container
        if "one_of" in kwargs:
            container = _required_choice(container, kwargs.pop("one_of"))
        return container.add_argument(_flag(self._field.name), **kwargs)


def _required_choice(container: argparse._ActionsContainer, name: str) -> argparse._MutuallyExclusiveGroup:
    """The required mutually exclusive group `name` of the container, made by its first field."""
    groups = vars(container).setdefault("_required_choices", {})
    if name not in groups:
        groups[name] = container.add_mutually_exclusive_group(required=True)
    return groups[name]


def _flag(name: str) -> str:
    return "--" + name.replace("_", "-")


class SageMakerArgumentParser(HfArgumentParser):
    """HfArgumentParser for the command line SageMaker's training toolkit builds from a job's hyperparameters: one
    `--dashed-name` per field, defaults from SM_* variables, a boolean as a bare switch, fields marked `one_of`
    the same name as one required choice."""

    @staticmethod
    def _parse_dataclass_field(parser: argparse._ActionsContainer, field: dataclasses.Field) -> None:
        if field.type is bool:
            parser.add_argument(_flag(field.name), action="store_true", help=field.metadata.get("help"))
            return
        HfArgumentParser._parse_dataclass_field(_DashedFlag(parser, field), field)
