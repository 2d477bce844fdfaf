"""The tarball helper is byte-deterministic and writes normalised metadata."""

from __future__ import annotations

import gzip
import hashlib
import io
import os
import tarfile
import time

from stacks.shared import assets
from stacks.shared.assets import build_content_addressed, tarball_bytes


def _populate(root):
    (root / "pkg").mkdir(parents=True)
    (root / "b.txt").write_text("b")
    (root / "a.txt").write_text("a")
    (root / "pkg" / "mod.py").write_text("x = 1\n")
    (root / "pkg" / "__pycache__").mkdir()
    (root / "pkg" / "__pycache__" / "mod.cpython-311.pyc").write_bytes(b"junk")
    (root / "run.sh").write_text("#!/bin/sh\n")
    (root / "run.sh").chmod(0o755)


def test_same_content_gives_same_bytes_regardless_of_times_and_creation_order(tmp_path):
    first, second = tmp_path / "one", tmp_path / "two"
    _populate(first)
    time.sleep(0.01)
    _populate(second)
    os.utime(second / "a.txt", (1, 1))
    assert tarball_bytes(first) == tarball_bytes(second)


def test_entries_are_sorted_normalised_and_caches_skipped(tmp_path):
    _populate(tmp_path / "src")
    data = tarball_bytes(tmp_path / "src")
    assert data[4:8] == b"\0\0\0\0", "gzip header mtime must be zero"
    assert data[3] & 0x08 == 0, "gzip header must not carry a file name"
    with tarfile.open(fileobj=io.BytesIO(gzip.decompress(data))) as tar:
        members = tar.getmembers()
    names = [m.name for m in members]
    assert names == ["a.txt", "b.txt", "pkg", "pkg/mod.py", "run.sh"]
    assert {m.mtime for m in members} == {0}
    assert {(m.uid, m.gid, m.uname, m.gname) for m in members} == {(0, 0, "root", "root")}
    modes = {m.name: m.mode for m in members}
    assert modes["run.sh"] == 0o755 and modes["a.txt"] == 0o644 and modes["pkg"] == 0o755


def test_extra_files_override_and_change_the_hash(tmp_path):
    _populate(tmp_path / "src")
    plain = tarball_bytes(tmp_path / "src")
    rendered = tarball_bytes(tmp_path / "src", extra_files={"a.txt": b"rendered"})
    assert plain != rendered
    with tarfile.open(fileobj=io.BytesIO(gzip.decompress(rendered))) as tar:
        assert tar.extractfile("a.txt").read() == b"rendered"
        assert tar.getnames().count("a.txt") == 1


def test_built_asset_is_named_by_its_content_hash(tmp_path, monkeypatch):
    monkeypatch.setattr(assets, "ASSET_BUILD_DIR", tmp_path / "build")
    _populate(tmp_path / "src")
    out = build_content_addressed(tmp_path / "src")
    data = tarball_bytes(tmp_path / "src")
    assert out == tmp_path / "build" / f"{hashlib.sha256(data).hexdigest()}.tar.gz"
    assert out.read_bytes() == data
    (tmp_path / "src" / "a.txt").write_text("changed")
    assert build_content_addressed(tmp_path / "src") != out
    assert build_content_addressed(tmp_path / "src", extra_files={"a.txt": b"a"}) == out


def test_without_a_folder_only_the_in_memory_files_ship(tmp_path):
    data = tarball_bytes(None, extra_files={"serving.properties": b"engine=Python\n"})
    with tarfile.open(fileobj=io.BytesIO(gzip.decompress(data))) as tar:
        assert tar.getnames() == ["serving.properties"]
        assert tar.extractfile("serving.properties").read() == b"engine=Python\n"
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "serving.properties").write_text("engine={{engine}}\n")
    assert data == tarball_bytes(tmp_path / "src", extra_files={"serving.properties": b"engine=Python\n"})
