"""The habits of CONTRIBUTING.md that a machine can check: no tracker numbers in what we ship, no source file in
stacks/, training_code/, local/ or tools/ over 400 lines and no function there over 60 (data files may be long)."""

from __future__ import annotations

import ast
import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

# "issue 17", "defect 6", "issue-19", "bug #4", a bare "#26", a test named for a number; an upstream reference
# keeps its repository ("pytest-dev/pytest-xdist#1386") or its project ("djl-serving PR #2939") and passes.
TRACKER_NUMBER = re.compile(
    r"\b(?:issue|defect|bug|ticket)s?[ -]?#?\d+|(?<![\w/.-])(?<!PR )#\d+\b|def test_\w*(?:issue|defect|regression)",
    re.IGNORECASE,
)
SHOWS_WHAT_NOT_TO_WRITE = {"CONTRIBUTING.md", "tests/test_habits.py"}
MAX_LINES = 400
MAX_FUNCTION_LINES = 60


def tracked_files() -> list[Path]:
    """The repository's files as git tracks them, or every file outside the ignored folders in a plain copy."""
    listed = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, text=True, check=False)
    if listed.returncode == 0:
        return [ROOT / name for name in listed.stdout.split("\0") if name]
    skipped = {".git", ".venv", ".venv-app", ".venv-checkov", ".venv-vllm", ".tools", "node_modules", "build"}
    return [path for path in ROOT.rglob("*") if path.is_file() and not skipped & set(path.relative_to(ROOT).parts)]


def is_text(path: Path) -> bool:
    """Any UTF-8 file without NUL bytes, whatever its suffix: data files (.json, .jsonl, .properties) are read by
    people too, so the habits hold there as well."""
    if not path.is_file():
        return False
    data = path.read_bytes()
    if b"\0" in data:
        return False
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def text_files() -> list[Path]:
    return [path for path in tracked_files() if is_text(path)]


def test_data_files_count_as_text():
    names = {path.relative_to(ROOT).as_posix() for path in text_files()}
    assert {"tools/prices.json", "stacks/images.json", "cdk.json"} <= names


def tracker_numbers(text: str) -> list[str]:
    return [match.group(0) for match in TRACKER_NUMBER.finditer(text)]


@pytest.mark.parametrize(
    "line",
    [
        "fix for issue 26",
        "defect 6 of issue 17",
        "the pre-issue-19 statement",
        "see #26",
        "def test_issue_17_case_3():",
        "def test_regression():",
    ],
)
def test_a_tracker_number_is_found(line):
    assert tracker_numbers(line) != []


@pytest.mark.parametrize(
    "line",
    [
        "pytest-dev/pytest-xdist#1386",
        "djl-serving dropped Neuron (PR #2939)",
        "shellcheck reported issue in this script: SC2086",
        "## 1. Install",
        "color: #fff",
    ],
)
def test_an_upstream_reference_or_plain_word_is_not_a_tracker_number(line):
    assert tracker_numbers(line) == []


def test_no_code_test_or_doc_cites_an_issue_or_defect_number():
    found = []
    for path in text_files():
        if path.relative_to(ROOT).as_posix() in SHOWS_WHAT_NOT_TO_WRITE or not path.is_file():
            continue
        for number, line in enumerate(path.read_text(encoding="utf-8", errors="replace").splitlines(), 1):
            found += [f"{path.relative_to(ROOT)}:{number}: {hit!r}" for hit in tracker_numbers(line)]
    assert found == [], "say the behaviour instead (CONTRIBUTING.md):\n" + "\n".join(found)


SOURCE_FOLDERS = ("stacks", "training_code", "local", "tools")
# What people write and read as code; data files (the NAS sample pairs, a benchmark task's rows) may be long.
SOURCE_SUFFIXES = {".py", ".sh", ".cjs", ".js", ".yaml", ".yml", ".properties", ".toml", ".cfg"}


def _source_files(folder: str) -> list[Path]:
    return [
        path
        for path in text_files()
        if path.relative_to(ROOT).parts[0] == folder and (path.suffix in SOURCE_SUFFIXES or path.name == "Makefile")
    ]


def long_functions(source: str) -> list[tuple[str, int, int]]:
    """(name, first line, length) of every function or method over MAX_FUNCTION_LINES, from its `def` line to its
    last line, docstring included: what a reader has to hold at once."""
    return [
        (node.name, node.lineno, node.end_lineno - node.lineno + 1)
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
        and node.end_lineno - node.lineno + 1 > MAX_FUNCTION_LINES
    ]


def test_a_long_method_is_found():
    body = "\n".join(f"        x{i} = {i}" for i in range(MAX_FUNCTION_LINES))
    source = f"class A:\n    def short(self):\n        return 1\n\n    def long(self):\n{body}\n"
    assert long_functions(source) == [("long", 5, MAX_FUNCTION_LINES + 1)]


@pytest.mark.parametrize("folder", SOURCE_FOLDERS)
def test_no_source_file_is_over_400_lines(folder):
    counts = {
        path.relative_to(ROOT).as_posix(): len(path.read_text(encoding="utf-8").splitlines())
        for path in _source_files(folder)
    }
    over = {name: lines for name, lines in counts.items() if lines > MAX_LINES}
    assert over == {}, f"split by concern (CONTRIBUTING.md): {over}"


@pytest.mark.parametrize("folder", SOURCE_FOLDERS)
def test_no_function_is_over_60_lines(folder):
    over = [
        f"{path.relative_to(ROOT)}:{line} {name}: {lines} lines"
        for path in _source_files(folder)
        if path.suffix == ".py"
        for name, line, lines in long_functions(path.read_text(encoding="utf-8"))
    ]
    assert over == [], "split by concern (CONTRIBUTING.md):\n" + "\n".join(over)
