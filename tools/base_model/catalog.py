"""config/models/<name>.yaml: a record written as the synth reads it back (plain YAML, the record's field order),
never over a record whose facts differ unless asked."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import yaml

from stacks.config import ConfigError
from stacks.config.base_model_record import BaseModelRecord, parse_record, record_dict, record_name
from tools.base_model.model import Refused

HEADER = (
    "# Written by `make base-model` (tools/base_model) from the model's own files: the facts the synth knows of\n"
    "# this base model. Review and commit it like the model lock; run the tool again rather than editing it.\n"
)


def render(record: BaseModelRecord) -> str:
    return HEADER + yaml.safe_dump(record_dict(record), sort_keys=False, default_flow_style=False, width=1000)


def read_record(path: Path) -> BaseModelRecord:
    return parse_record(yaml.safe_load(path.read_text(encoding="utf-8")), source=path.as_posix())


def differences(old: BaseModelRecord, new: BaseModelRecord) -> list[str]:
    before, after = record_dict(old), record_dict(new)
    return [f"{name}: {before[name]!r} -> {after[name]!r}" for name in after if before[name] != after[name]]


@dataclass(frozen=True)
class Written:
    path: Path
    state: str  # "written", "unchanged" or "replaced"
    changes: tuple[str, ...] = ()


def plan(record: BaseModelRecord, output: Path, *, force: bool, shown: str) -> Written:
    """What writing the record as <output>/<record_name>.yaml will do; a different one already there needs `force`
    (Refused otherwise, before anything is written or uploaded)."""
    path = output / f"{record_name(record.hub_id)}.yaml"
    if not path.is_file():
        return Written(path, "written")
    try:
        changes = tuple(differences(read_record(path), record))
    except (ConfigError, yaml.YAMLError) as err:
        changes = (f"the file cannot be read as a record ({' '.join(str(err).split())})",)
    if not changes:
        return Written(path, "unchanged")
    if not force:
        raise Refused(
            f"{shown}/{path.name}: already records other facts ({'; '.join(changes)}): review them, then run again "
            "with --force (FORCE=1) to replace it"
        )
    return Written(path, "replaced", changes)


def write(record: BaseModelRecord, planned: Written) -> None:
    if planned.state != "unchanged":
        planned.path.parent.mkdir(parents=True, exist_ok=True)
        planned.path.write_text(render(record), encoding="utf-8")
