"""A Hugging Face hub cache seeded from model folders on this machine, for jobs run offline by the emulator.

The workflows name their base models by hub id (`sentence-transformers/all-MiniLM-L6-v2`), and the jobs load
them with `from_pretrained(<hub id>)`, as they do on SageMaker. This machine has no hub access, so the emulated
jobs get `HF_HOME` pointing at a cache laid out as the hub client writes it (`hub/models--<org>--<name>/
snapshots/<revision>/` plus `refs/main`) and `HF_HUB_OFFLINE=1`: the same code path resolves the id locally.
"""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path


def _revision(folder: Path) -> str:
    """A stable 40-hex revision for the folder's content (the hub uses commit hashes of the same length)."""
    digest = hashlib.sha1()
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        digest.update(path.relative_to(folder).as_posix().encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()


def seed(cache_home: Path, repo_id: str, folder: Path) -> Path:
    """Put `folder` in the cache under `repo_id` (idempotent); returns the snapshot folder."""
    repo = Path(cache_home) / "hub" / ("models--" + repo_id.replace("/", "--"))
    revision = _revision(folder)
    snapshot = repo / "snapshots" / revision
    if not snapshot.is_dir():
        shutil.copytree(folder, snapshot, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    (repo / "refs").mkdir(parents=True, exist_ok=True)
    (repo / "refs" / "main").write_text(revision)
    return snapshot


def offline_environment(cache_home: Path) -> dict[str, str]:
    return {"HF_HOME": str(cache_home), "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
