"""--env: the profile and the model written into config/<env>.yaml as line edits, only after the edited file passes.

The edit is made on a copy of config/ first (tools/config_edit.py: the changed lines only, comments and key order
kept) and every environment of the copy is loaded with the synth's loader, rehearsal checks included (staging
rehearses prod, so a profile written into prod is checked from staging too). Only then is the file replaced, so a
refusal leaves config/ as it was. The served version (config/<env>.model.json) is not checked: a new profile is
served by a version trained for it, which the promotion checks and writes; where the current one no longer fits,
a note says so.
"""

from __future__ import annotations

import difflib
import shutil
import tempfile
from pathlib import Path

from stacks.config.errors import ConfigError
from stacks.config.loader import available_envs, load_config
from stacks.config.model_lock import lock_path
from stacks.config.profile_search import Derived
from stacks.config.rehearsal import check_rehearsal


class WriteRefused(Exception):
    """The edited file would fail the synth, or cannot be made as a line edit; nothing was written (one line)."""


def _shown(error: ConfigError, copy: Path) -> str:
    """The synth's line, naming config/ rather than the copy it was checked in."""
    return str(error).replace(f"{copy.as_posix()}/", "config/")


def _check_all(copy: Path) -> None:
    for name in available_envs(copy):
        config = load_config(name, copy, served=False)
        check_rehearsal(config, lambda other: load_config(other, copy, served=False))


def served_note(config_dir: Path, env: str) -> str | None:
    """A line when config/<env>.model.json's version does not fit the written profile (None: it does, or none)."""
    if not lock_path(config_dir, env).is_file():
        return None
    try:
        load_config(env, config_dir)
    except ConfigError as error:
        return f"note: the served version no longer fits: {error}; promote a version trained for this profile"
    return None


def commented_changes(before: str, after: str) -> list[int]:
    """1-based numbers of the lines of `after` whose value changed and which keep a comment written for the old one
    (the reviewer checks each still holds)."""
    old, new = before.splitlines(), after.splitlines()
    found = []
    for tag, _, _, start, end in difflib.SequenceMatcher(a=old, b=new, autojunk=False).get_opcodes():
        if tag == "replace":
            found += [n + 1 for n in range(start, end) if " #" in new[n]]
    return found


def write_profile(config_dir: Path, env: str, derived: Derived) -> list[int]:
    """Write `derived`'s changes into config_dir/<env>.yaml, or raise WriteRefused (one line) having written
    nothing; returns commented_changes of the file."""
    from tools.config_edit import EditError, edit

    path = config_dir / f"{env}.yaml"
    with tempfile.TemporaryDirectory(prefix="profile-") as folder:
        copy = Path(folder) / "config"
        shutil.copytree(config_dir, copy, ignore=shutil.ignore_patterns("*.model.json"))
        try:
            edit(copy / path.name, derived.changes.values, derived.changes.removed)
            _check_all(copy)
        except EditError as error:
            shown = str(error).replace(f"{copy.as_posix()}/", "config/")
            raise WriteRefused(f"config/{env}.yaml: cannot be edited line by line: {shown}; nothing written") from None
        except ConfigError as error:
            shown = _shown(error, copy)
            raise WriteRefused(
                f"config/{env}.yaml with this profile would fail the synth; nothing written: {shown}"
            ) from None
        before = path.read_text(encoding="utf-8")
        shutil.copyfile(copy / path.name, path)
    return commented_changes(before, path.read_text(encoding="utf-8"))
