"""Reading training rows from JSONL, JSON, Parquet or a saved `datasets` folder, keeping where each came from.

Every row carries its file and 1-based row number so that a malformed row can be reported precisely.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, NamedTuple

SUPPORTED_SUFFIXES = (".jsonl", ".json", ".parquet")
_SAVED_DATASET_MARKERS = ("dataset_info.json", "dataset_dict.json", "state.json")


class DataError(ValueError):
    """A data problem the user must fix; the message names the file and row."""


class SourcedRow(NamedTuple):
    source: str
    row_number: int
    fields: dict[str, Any]


def _read_jsonl(path: Path) -> list[SourcedRow]:
    rows = []
    with path.open(encoding="utf-8") as handle:
        for line_number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            try:
                fields = json.loads(line)
            except json.JSONDecodeError as error:
                raise DataError(f"{path}: row {line_number}: invalid JSON ({error.msg})") from error
            rows.append(_as_row(str(path), line_number, fields))
    return rows


def _read_json(path: Path) -> list[SourcedRow]:
    text = path.read_text(encoding="utf-8")
    try:
        document = json.loads(text)
    except json.JSONDecodeError as error:
        if error.msg == "Extra data":  # JSON lines saved as .json, as `datasets` writes them
            return _read_jsonl(path)
        raise DataError(f"{path}: invalid JSON ({error.msg} at line {error.lineno})") from error
    if isinstance(document, dict):
        lists = [value for value in document.values() if isinstance(value, list)]
        if len(lists) != 1:
            raise DataError(f"{path}: expected a list of rows or an object holding exactly one list")
        document = lists[0]
    if not isinstance(document, list):
        raise DataError(f"{path}: expected a list of rows")
    return [_as_row(str(path), index, fields) for index, fields in enumerate(document, start=1)]


def _read_parquet(path: Path) -> list[SourcedRow]:
    import pyarrow.parquet as parquet

    table = parquet.read_table(path)
    return [_as_row(str(path), index, fields) for index, fields in enumerate(table.to_pylist(), start=1)]


# Split names an evaluation set goes by; `test` is never among them: it is kept for the final, unseen check.
EVAL_SPLITS = ("validation", "valid", "eval", "dev")
SPLIT_PREFIXES = {"train": ("train",), "eval": EVAL_SPLITS}


def _choose_split(path: Path, available: list[str], split: str, role: str) -> str:
    wanted = [split] if split != "auto" else list(SPLIT_PREFIXES[role])
    found = next((name for name in wanted if name in available), None)
    if found is None:
        raise DataError(
            f"{path}: saved DatasetDict has no {' or '.join(map(repr, wanted))} split (has {sorted(available)}); "
            f"pass --{role}_split"
        )
    return found


def _read_saved_dataset(path: Path, split: str, role: str) -> list[SourcedRow]:
    import datasets

    loaded = datasets.load_from_disk(str(path))
    if isinstance(loaded, datasets.DatasetDict):
        split = _choose_split(path, list(loaded), split, role)
        loaded = loaded[split]
        source = f"{path}[{split}]"
    else:
        source = str(path)
    return [_as_row(source, index, fields) for index, fields in enumerate(loaded, start=1)]


def _as_row(source: str, row_number: int, fields: Any) -> SourcedRow:
    if not isinstance(fields, dict):
        raise DataError(f"{source}: row {row_number}: expected an object, got {type(fields).__name__}")
    return SourcedRow(source, row_number, fields)


def _read_file(path: Path) -> list[SourcedRow]:
    suffix = path.suffix.lower()
    if suffix == ".jsonl":
        return _read_jsonl(path)
    if suffix == ".json":
        return _read_json(path)
    if suffix == ".parquet":
        return _read_parquet(path)
    raise DataError(f"{path}: unsupported file type (use {', '.join(SUPPORTED_SUFFIXES)})")


def is_saved_dataset(path: Path) -> bool:
    return path.is_dir() and any((path / marker).exists() for marker in _SAVED_DATASET_MARKERS)


def data_files(folder: Path, pattern: str, role: str) -> list[Path]:
    """The files of a folder channel that hold this role's rows, so that a test split is never trained on.

    `auto`: the only data file, else those whose name starts with the role's split name (train*; validation*,
    valid*, eval*, dev*). Any other pattern is a glob relative to the folder (e.g. `*.jsonl`, `part-*.parquet`).
    """
    candidates = sorted(
        file
        for file in folder.rglob("*" if pattern == "auto" else pattern)
        if file.is_file() and file.suffix.lower() in SUPPORTED_SUFFIXES and not file.name.startswith(".")
    )
    if pattern == "auto" and len(candidates) > 1:
        prefixes = SPLIT_PREFIXES[role]
        candidates = [file for file in candidates if file.name.lower().startswith(prefixes)]
        if not candidates:
            raise DataError(
                f"{folder}: several data files and none named {'/'.join(p + '*' for p in prefixes)}; "
                f"pass --{role}_files with a glob"
            )
    if not candidates:
        raise DataError(f"{folder}: no {', '.join(SUPPORTED_SUFFIXES)} file matches {pattern!r}")
    return candidates


def read_rows(location: str | Path, split: str = "auto", files: str = "auto", role: str = "train") -> list[SourcedRow]:
    """Rows of a file, of a folder's selected files (sorted), or of a saved dataset's split, for `role`."""
    path = Path(location)
    if not path.exists():
        raise DataError(f"{path}: no such file or folder")
    if is_saved_dataset(path):
        rows = _read_saved_dataset(path, split, role)
    elif path.is_dir():
        rows = [row for file in data_files(path, files, role) for row in _read_file(file)]
    else:
        rows = _read_file(path)
    if not rows:
        raise DataError(f"{path}: no rows")
    return rows
