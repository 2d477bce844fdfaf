"""Deterministic `.tar.gz` assets: the same folder always gives the same bytes, hence the same hash.

CDK names uploaded assets by content hash, so a byte-stable tarball means an unchanged folder
never shows up in a diff or triggers a SageMaker model replacement.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import os
import tarfile
from collections.abc import Iterable
from pathlib import Path

from ..paths import ASSET_BUILD_DIR

FIXED_MTIME = 0
_SKIPPED_NAMES = {"__pycache__", ".pytest_cache", ".ruff_cache", ".DS_Store"}
_SKIPPED_SUFFIXES = (".pyc", ".pyo")


def _members(root: Path) -> Iterable[Path]:
    """All files and folders under root, sorted, skipping caches that differ run to run."""
    for path in sorted(root.rglob("*"), key=lambda p: p.relative_to(root).as_posix()):
        rel_parts = path.relative_to(root).parts
        if any(part in _SKIPPED_NAMES for part in rel_parts) or path.name.endswith(_SKIPPED_SUFFIXES):
            continue
        yield path


def _tar_info(name: str, *, is_dir: bool, size: int = 0, executable: bool = False) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.mtime = FIXED_MTIME
    info.uid = info.gid = 0
    info.uname = info.gname = "root"
    if is_dir:
        info.type = tarfile.DIRTYPE
        info.mode = 0o755
    else:
        info.size = size
        info.mode = 0o755 if executable else 0o644
    return info


def tarball_bytes(source: Path | None, *, extra_files: dict[str, bytes] | None = None) -> bytes:
    """Tar+gzip `source` (and in-memory `extra_files`, which win over files of the same name); `source` None: the
    in-memory files alone (a rendered file whose template lives beside code that must not ship)."""
    extra_files = dict(extra_files or {})
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.PAX_FORMAT) as tar:
        entries: dict[str, tuple[bool, bytes, bool]] = {}
        if source is not None and source.is_dir():
            for path in _members(source):
                name = path.relative_to(source).as_posix()
                if path.is_dir():
                    entries[name] = (True, b"", False)
                elif path.is_file():
                    entries[name] = (False, path.read_bytes(), os.access(path, os.X_OK))
        for name, content in extra_files.items():
            entries[name] = (False, content, False)
        for name in sorted(entries):
            is_dir, content, executable = entries[name]
            info = _tar_info(name, is_dir=is_dir, size=len(content), executable=executable)
            tar.addfile(info, None if is_dir else io.BytesIO(content))
    compressed = io.BytesIO()
    # filename="" and mtime=0 keep the gzip header free of names and times.
    with gzip.GzipFile(filename="", mode="wb", fileobj=compressed, mtime=0, compresslevel=9) as gz:
        gz.write(raw.getvalue())
    return compressed.getvalue()


def build_content_addressed(source: str | Path | None, *, extra_files: dict[str, bytes] | None = None) -> Path:
    """Build the tarball under build/assets/<sha256>.tar.gz so parallel synths never collide."""
    data = tarball_bytes(None if source is None else Path(source), extra_files=extra_files)
    out_path = ASSET_BUILD_DIR / f"{hashlib.sha256(data).hexdigest()}.tar.gz"
    if not out_path.is_file():
        out_path.parent.mkdir(parents=True, exist_ok=True)
        tmp = out_path.with_name(f".{out_path.name}.{os.getpid()}.tmp")
        tmp.write_bytes(data)
        tmp.replace(out_path)
    return out_path
