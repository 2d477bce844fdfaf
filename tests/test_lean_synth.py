"""The synth path (app.py, so make synth / review / cost / cdk deploy) needs only requirements.txt.

make synth runs in a lean venv with the app requirements alone; this proves, in the full venv, that
synthesizing imports no module outside the standard library and the closure of requirements.txt
(no torch, transformers, bitsandbytes, moto, locust, ...), so the lean venv cannot miss one.
"""

from __future__ import annotations

import importlib.metadata as md
import json
import os
import re
import shutil
import subprocess
import sys

from packaging.requirements import Requirement

from tests.synth import ROOT, cli_context

ML_STACK = {
    "torch",
    "transformers",
    "bitsandbytes",
    "peft",
    "moto",
    "locust",
    "sagemaker_core",
    "syne_tune",
    "numpy",
    "datasets",
    "accelerate",
    "safetensors",
    "tokenizers",
}
_PROBE = """
import json, runpy, sys
at_start = set(sys.modules)  # the interpreter's own start-up (site hooks), not the app's
sys.argv = ["app.py"]
try:
    runpy.run_path("app.py", run_name="__main__")
except SystemExit as stop:
    assert not stop.code, stop.code
print(json.dumps(sorted({name.split(".")[0] for name in set(sys.modules) - at_start})))
"""


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _app_closure() -> set[str]:
    """requirements.txt and everything those distributions require (extras left out)."""
    pending = [
        Requirement(line.split("#")[0].strip()).name
        for line in (ROOT / "requirements.txt").read_text().splitlines()
        if line.split("#")[0].strip()
    ]
    seen: set[str] = set()
    while pending:
        name = _norm(pending.pop())
        if name in seen:
            continue
        seen.add(name)
        for text in md.requires(name) or []:
            req = Requirement(text)
            if req.marker is None or req.marker.evaluate({"extra": ""}):
                pending.append(req.name)
    return seen


def test_synth_imports_only_the_app_requirements(tmp_path):
    env = dict(
        os.environ,
        CDK_OUTDIR=str(tmp_path / "out"),
        CDK_CONTEXT_JSON=json.dumps({**cli_context(), "env": "prod"}),
        PYTHONDONTWRITEBYTECODE="1",
    )
    proc = subprocess.run(
        [sys.executable, "-c", _PROBE], cwd=ROOT, env=env, capture_output=True, text=True, timeout=600
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    imported = set(json.loads(proc.stdout.strip().splitlines()[-1]))
    assert (tmp_path / "out" / "manifest.json").is_file()  # it really synthesized
    assert imported & ML_STACK == set()
    providers = md.packages_distributions()
    allowed = _app_closure()
    outside = sorted(
        f"{module} ({', '.join(providers[module])})"
        for module in imported - set(sys.stdlib_module_names)
        if module in providers and not {_norm(d) for d in providers[module]} & allowed
    )
    assert outside == [], f"synth imports modules outside requirements.txt: {outside}"


def _make_dry_run(*args: str) -> str:
    """Every command make would run from nothing (-B: as if no stamp existed)."""
    proc = subprocess.run(["make", "-n", "-B", *args], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def test_synth_review_cost_and_aws_deploy_install_only_the_app_requirements():
    for target in (["synth"], ["review"], ["cost"], ["deploy", "TARGET=aws"]):
        commands = _make_dry_run(*target, "ENV=prod")
        assert "pip install -q -r requirements.txt" in commands, target
        assert "requirements-dev.txt" not in commands, target
        assert target[0] == "deploy" or ".venv/bin/python" not in commands, target  # deploy's case names both
    assert '--app ".venv-app/bin/python app.py"' in _make_dry_run("synth")


def test_test_and_the_local_emulator_keep_the_full_install():
    for target in (["test"], ["deploy", "TARGET=local"]):
        assert "pip install -q -r requirements-dev.txt" in _make_dry_run(*target), target


def _launch(tmp_path, *venvs: str) -> subprocess.CompletedProcess:
    """tools/cdk_app.sh in a copy of the root holding only `venvs`, each a python that says which it is."""
    (tmp_path / "tools").mkdir(parents=True)
    shutil.copy(ROOT / "tools" / "cdk_app.sh", tmp_path / "tools" / "cdk_app.sh")
    for venv in venvs:
        python = tmp_path / venv / "bin" / "python"
        python.parent.mkdir(parents=True)
        python.write_text(f'#!/bin/sh\necho "{venv} $*"\n')
        python.chmod(0o755)
    app = json.loads((ROOT / "cdk.json").read_text())["app"]
    return subprocess.run(["sh", "-c", app], cwd=tmp_path, capture_output=True, text=True, timeout=30)


def test_cdk_json_app_runs_the_lean_env_first_then_the_full_one(tmp_path):
    both = _launch(tmp_path / "both", ".venv-app", ".venv")
    assert (both.returncode, both.stdout) == (0, ".venv-app app.py\n")
    full = _launch(tmp_path / "full", ".venv")
    assert (full.returncode, full.stdout) == (0, ".venv app.py\n")


def test_cdk_json_app_without_an_env_fails_with_one_line(tmp_path):
    proc = _launch(tmp_path)
    assert proc.returncode == 1 and proc.stdout == "" and proc.stderr.count("\n") == 1
    assert proc.stderr.startswith(
        "cdk app: neither .venv-app/bin/python nor .venv/bin/python exists; run make app-deps"
    )


def test_make_diff_checks_the_credentials_then_diffs_the_lean_synth_against_the_deployed_stacks():
    commands = _make_dry_run("diff", "ENV=staging")
    assert "requirements-dev.txt" not in commands and '--app ".venv-app/bin/python app.py"' in commands
    check = ".venv-app/bin/python tools/preflight.py identity --env staging"
    diff = "npx cdk diff --app cdk.out -c env=staging --method=auto"  # every stack: diff has no --all
    assert commands.index(check) < commands.index("npx cdk synth") < commands.index(diff)
    assert "--method=template" in _make_dry_run("diff", "METHOD=template")


def test_make_help_lists_every_environment_and_diff():
    proc = subprocess.run(
        ["make", "--no-print-directory", "help"], cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    envs = "|".join(sorted(p.stem for p in (ROOT / "config").glob("*.yaml")))
    assert proc.returncode == 0 and f"make synth [ENV={envs}]" in proc.stdout
    assert {"dev", "prod", "staging", "local"} <= set(envs.split("|"))
    assert "make diff [ENV=]" in proc.stdout and "ENV=dev|prod " not in proc.stdout
