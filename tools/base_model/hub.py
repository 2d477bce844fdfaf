"""A model on the Hugging Face hub, read with huggingface_hub and the user's token, no weights downloaded.

model_info gives the commit (every later read is pinned to it) and whether the repository is gated; config.json and
tokenizer_config.json come through hf_hub_download; get_safetensors_metadata reads each weight file's header with a
ranged request. The token is huggingface_hub's own choice (HF_TOKEN, else the stored `hf auth login`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tools.base_model.local import read_json
from tools.base_model.model import TOKENIZER_CONFIG, ModelFiles, Refused, chat_template_in

TOKEN_HELP = "log in with `hf auth login` (huggingface_hub's CLI) or set HF_TOKEN to a token that has access"


def _api():
    from huggingface_hub import HfApi

    return HfApi()


def _tensors(api, hub_id: str, sha: str) -> dict[str, dict[str, Any]] | None:
    from huggingface_hub.errors import NotASafetensorsRepoError

    try:
        found = api.get_safetensors_metadata(hub_id, revision=sha)
    except NotASafetensorsRepoError:
        return None
    return {
        name: {"dtype": info.dtype, "shape": list(info.shape)}
        for file in found.files_metadata.values()
        for name, info in file.tensors.items()
    }


def _chat_template(api, hub_id: str, sha: str, names: set[str]) -> bool | None:
    found = chat_template_in(names, None)
    if found or TOKENIZER_CONFIG not in names:
        return found
    path = Path(api.hf_hub_download(hub_id, TOKENIZER_CONFIG, revision=sha))
    return chat_template_in(names, read_json(path, f"{hub_id}/{TOKENIZER_CONFIG}"))


def read_hub(hub_id: str, revision: str | None) -> ModelFiles:
    """The facts of hub repository `hub_id` at `revision` (default: its main branch's head commit)."""
    import httpx2  # huggingface_hub's HTTP client
    from huggingface_hub.errors import GatedRepoError, RepositoryNotFoundError, RevisionNotFoundError

    api = _api()
    page = f"https://huggingface.co/{hub_id}"
    try:
        info = api.model_info(hub_id, revision=revision)
        sha = info.sha
        config = read_json(Path(api.hf_hub_download(hub_id, "config.json", revision=sha)), f"{hub_id}/config.json")
        names = {sibling.rfilename for sibling in info.siblings or ()}
        files = ModelFiles(
            source=hub_id,
            config_name=f"{hub_id}/config.json",
            config=config,
            tensors=_tensors(api, hub_id, sha),
            chat_template=_chat_template(api, hub_id, sha, names),
            revision=sha,
            gated=bool(info.gated),
        )
    except GatedRepoError:
        raise Refused(
            f"{hub_id}: gated, and this token has no access to its files: request access on {page}, then "
            f"{TOKEN_HELP}; nothing written"
        ) from None
    except RevisionNotFoundError:
        raise Refused(f"{hub_id}: no revision {revision!r}; give a branch, tag or commit of {page}") from None
    except httpx2.TransportError as err:
        raise OSError(f"{api.endpoint}: the hub cannot be reached ({err}); check the network or HF_ENDPOINT") from None
    except RepositoryNotFoundError:
        raise Refused(
            f"{hub_id}: no such model on the hub, or a private one this token cannot see: check the id, or "
            f"{TOKEN_HELP}; nothing written"
        ) from None
    return files
