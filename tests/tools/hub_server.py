"""A Hugging Face hub on 127.0.0.1 for huggingface_hub's own client (HF_ENDPOINT=http://127.0.0.1:<port>).

It answers the routes huggingface_hub 2.4 calls for what tools/base_model and tools/eval_data read, in the hub's
shapes (a dataset repository's routes are the same with `datasets` for `models`, and `/datasets/` before its id
in file URLs; `serve` takes it as `datasets/<org>/<name>`):
- GET /api/models/<org>/<name>[/revision/<rev>]: the repository's recorded model_info JSON (tests/data/hub), its
  `sha` and `gated` as published; metadata of a gated repository is public, as on the hub.
- GET /api/models/<org>/<name>/tree/<rev>: the file list snapshot_download reads (path, size, oid), one page.
- HEAD and GET /<org>/<name>/resolve/<rev>/<file>: X-Repo-Commit, ETag and Content-Length headers; a `Range:
  bytes=a-b` request gets 206 and those bytes (how get_safetensors_metadata reads a header without the weights).
- The hub's errors, which huggingface_hub turns into its exceptions by their X-Error-Code header: GatedRepo (401
  without a token with access), RepoNotFound, RevisionNotFound, EntryNotFound.

A weight file is its safetensors header followed by zeros up to its published size, so a 16 GB model costs its
headers only. Every request is kept in `requests` (method, path, Range), for the tests to see what was read.
"""

from __future__ import annotations

import hashlib
import json
import re
import struct
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

TOKEN = "hf_loopbackTokenWithAccess"  # the token the loopback hub grants access to gated repositories
_API = re.compile(r"/api/(?P<kind>models|datasets)/(?P<repo>[^/]+/[^/]+?)(?:/revision/(?P<rev>[^/]+))?$")
_TREE = re.compile(r"/api/(?P<kind>models|datasets)/(?P<repo>[^/]+/[^/]+)/tree/(?P<rev>[^/]+)$")
_RESOLVE = re.compile(r"/(?:(?P<kind>datasets)/)?(?P<repo>[^/]+/[^/]+)/resolve/(?P<rev>[^/]+)/(?P<file>.+)$")
_RANGE = re.compile(r"bytes=(\d+)-(\d*)$")


@dataclass(frozen=True)
class WeightFile:
    """A .safetensors file: its header's bytes, then zeros to `size` bytes."""

    header: dict[str, Any]
    size: int

    @property
    def prefix(self) -> bytes:
        raw = json.dumps(self.header, separators=(",", ":")).encode()
        raw += b" " * (-len(raw) % 8)  # safetensors pads its header to 8 bytes
        return struct.pack("<Q", len(raw)) + raw

    def read(self, start: int, end: int) -> bytes:
        prefix = self.prefix
        head = prefix[start : min(end, len(prefix))]
        return head + b"\0" * (end - start - len(head))


@dataclass
class Repo:
    info: dict[str, Any]  # the recorded GET /api/models/<id> response
    files: dict[str, bytes | WeightFile]
    tree_refused: bool = False  # the file listing answers 403, as a hub that stops answering mid-download

    @property
    def sha(self) -> str:
        return self.info["sha"]

    @property
    def gated(self) -> bool:
        return bool(self.info.get("gated"))


def safetensors_header(shapes: dict[str, list[int]], dtype: str = "BF16") -> tuple[dict[str, Any], int]:
    """The header a save of tensors `shapes` writes (in name order, contiguous) and the file's size."""
    header: dict[str, Any] = {"__metadata__": {"format": "pt"}}
    offset, width = 0, {"BF16": 2, "F16": 2, "F32": 4}[dtype]
    for name in sorted(shapes):
        size = width
        for dim in shapes[name]:
            size *= dim
        header[name] = {"dtype": dtype, "shape": shapes[name], "data_offsets": [offset, offset + size]}
        offset += size
    prefix_length = len(WeightFile(header, 0).prefix)
    return header, prefix_length + offset


def _size(content: bytes | WeightFile) -> int:
    return content.size if isinstance(content, WeightFile) else len(content)


@dataclass
class Hub:
    repos: dict[str, Repo]
    requests: list[tuple[str, str, str | None]] = field(default_factory=list)
    url: str = ""


def _repo_key(match: re.Match) -> str:
    """`serve`'s key of the repository a route names: its id, after `datasets/` for a dataset."""
    return f"datasets/{match['repo']}" if match["kind"] == "datasets" else match["repo"]


class _Handler(BaseHTTPRequestHandler):
    hub: Hub

    def log_message(self, *args: Any) -> None:  # the test output stays the tool's
        pass

    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        self._answer(body=True)

    def do_HEAD(self) -> None:  # noqa: N802 - http.server's name
        self._answer(body=False)

    def _error(self, status: int, code: str, message: str, body: bool) -> None:
        payload = json.dumps({"error": message}).encode()
        self.send_response(status)
        self.send_header("X-Error-Code", code)
        self.send_header("X-Error-Message", message)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        if body:
            self.wfile.write(payload)

    def _send(self, status: int, payload: bytes, headers: dict[str, str], body: bool) -> None:
        self.send_response(status)
        for name, value in {"Content-Length": str(len(payload)), **headers}.items():
            self.send_header(name, value)
        self.end_headers()
        if body:
            self.wfile.write(payload)

    def _answer(self, body: bool) -> None:
        path = self.path.split("?", 1)[0]
        self.hub.requests.append((self.command, path, self.headers.get("Range")))
        if match := _TREE.match(path):
            return self._tree(_repo_key(match), match["rev"], body)
        if match := _API.match(path):
            return self._info(_repo_key(match), match["rev"], body)
        if match := _RESOLVE.match(path):
            return self._file(_repo_key(match), match["rev"], match["file"], body)
        return self._error(404, "RepoNotFound", "Repository not found", body)

    def _repo(self, repo_id: str, body: bool) -> Repo | None:
        repo = self.hub.repos.get(repo_id)
        if repo is None:
            self._error(401, "RepoNotFound", "Repository not found", body)
        return repo

    def _info(self, repo_id: str, revision: str | None, body: bool) -> None:
        repo = self._repo(repo_id, body)
        if repo is None:
            return
        if revision not in (None, "main", repo.sha):
            return self._error(404, "RevisionNotFound", f"Invalid rev id: {revision}", body)
        self._send(200, json.dumps(repo.info).encode(), {"Content-Type": "application/json"}, body)

    def _tree(self, repo_id: str, revision: str, body: bool) -> None:
        repo = self._repo(repo_id, body)
        if repo is None:
            return
        if repo.tree_refused:
            return self._error(403, "Forbidden", "Forbidden", body)
        if revision not in ("main", repo.sha):
            return self._error(404, "RevisionNotFound", f"Invalid rev id: {revision}", body)
        entries = [
            {"type": "file", "path": name, "size": _size(content), "oid": hashlib.sha1(name.encode()).hexdigest()}
            for name, content in sorted(repo.files.items())
        ]
        self._send(200, json.dumps(entries).encode(), {"Content-Type": "application/json"}, body)

    def _file(self, repo_id: str, revision: str, name: str, body: bool) -> None:
        repo = self._repo(repo_id, body)
        if repo is None:
            return
        if repo.gated and self.headers.get("Authorization") != f"Bearer {TOKEN}":
            message = (
                f"Access to model {repo_id} is restricted. You must have access to it and be authenticated to "
                "access it. Please log in."
            )
            return self._error(401, "GatedRepo", message, body)
        if revision not in ("main", repo.sha):
            return self._error(404, "RevisionNotFound", f"Invalid rev id: {revision}", body)
        content = repo.files.get(name)
        if content is None:
            return self._error(404, "EntryNotFound", "Entry not found", body)
        size = _size(content)
        etag = hashlib.sha256(f"{repo_id}/{name}".encode()).hexdigest()
        headers = {"X-Repo-Commit": repo.sha, "ETag": f'"{etag}"', "Accept-Ranges": "bytes"}
        wanted = _RANGE.match(self.headers.get("Range") or "")
        start, end = (int(wanted[1]), min(int(wanted[2] or size - 1) + 1, size)) if wanted else (0, size)
        if wanted:
            headers["Content-Range"] = f"bytes {start}-{end - 1}/{size}"
        if not body:  # HEAD: GET's headers, the length of what it would send, no bytes
            return self._send(200, b"", {**headers, "Content-Length": str(end - start)}, body)
        data = content.read(start, end) if isinstance(content, WeightFile) else content[start:end]
        self._send(206 if wanted else 200, data, headers, body)


@contextmanager
def serve(repos: dict[str, Repo]) -> Iterator[Hub]:
    """The loopback hub, serving `repos` ({hub id: Repo}) until the block ends."""
    hub = Hub(repos)
    handler = type("Handler", (_Handler,), {"hub": hub})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    hub.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield hub
    finally:
        server.shutdown()
        server.server_close()
