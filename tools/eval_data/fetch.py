"""A task's splits from its dataset: the hub repository at one commit (snapshot_download, then `datasets` on the
files), or a local copy of that repository (--source). `datasets` reads the repository's own configuration
(its README's `configs`, else the file layout), so a split is what the hub's dataset viewer shows."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from tools.eval_data.model import Refused, TaskDefinition

TOKEN_HELP = "log in with `hf auth login` (huggingface_hub's CLI) or set HF_TOKEN to a token that has access"


@dataclass(frozen=True)
class Fetched:
    """The split files of one task: {split: rows}, where they came from and at which commit (None: a copy)."""

    rows: dict[str, list[dict]]
    source: str
    revision: str | None


def _snapshot(repo_id: str, revision: str | None, work: Path) -> tuple[Path, str]:
    from huggingface_hub import HfApi, snapshot_download
    from huggingface_hub.errors import GatedRepoError, RepositoryNotFoundError, RevisionNotFoundError

    page = f"https://huggingface.co/datasets/{repo_id}"
    try:
        sha = HfApi().dataset_info(repo_id, revision=revision).sha
        folder = snapshot_download(repo_id, repo_type="dataset", revision=sha, local_dir=work / "repository")
    except GatedRepoError:
        raise Refused(f"{repo_id}: gated; request access on {page}, then {TOKEN_HELP}; nothing staged") from None
    except RevisionNotFoundError:
        raise Refused(f"{repo_id}: no revision {revision!r}; give a branch, tag or commit of {page}") from None
    except RepositoryNotFoundError:
        raise Refused(
            f"{repo_id}: no such dataset on the hub, or a private one: check the task or {TOKEN_HELP}"
        ) from None
    return Path(folder), sha


def _split_rows(folder: Path, task: TaskDefinition, work: Path) -> dict[str, list[dict]]:
    from datasets import load_dataset

    found = load_dataset(str(folder), task.dataset_name, cache_dir=str(work / "datasets-cache"))
    missing = [split for split in task.splits if split not in found]
    if missing:
        raise Refused(
            f"{task.name}: {task.dataset} ({task.dataset_name or 'default'}) has no split {missing[0]!r} "
            f"(it has {', '.join(found)}); nothing staged"
        )
    return {split: found[split].to_list() for split in task.splits}


def fetch(task: TaskDefinition, *, source: Path | None, revision: str | None, work: Path) -> Fetched:
    """The rows of every split `task` reads; a local `source` is used as it is, the hub at `revision`."""
    if source is not None:
        if not source.is_dir():
            raise Refused(f"{source}: no such folder; give a local copy of {task.dataset}'s repository")
        return Fetched(_split_rows(source, task, work), str(source), revision)
    folder, sha = _snapshot(task.dataset, revision, work)
    return Fetched(_split_rows(folder, task, work), task.dataset, sha)
