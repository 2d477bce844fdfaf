"""deploy.yml's checks before it touches an account, each refusal one line: tools/preflight.py, the chain's approvals.

Identity checks ask a real STS API (moto's server on 127.0.0.1, which answers GetCallerIdentity for its account
123456789012) through boto3; the approvals check reads a GitHub environment in the REST API's documented shape,
served on 127.0.0.1.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
import yaml

from stacks.config.loader import load_chain
from tests.synth import ROOT
from tests.tools.moto_server import loopback_moto_server
from tools import deploy_chain

MOTO_ACCOUNT = "123456789012"  # moto's default account: what its STS says the credentials belong to
OTHER_ACCOUNT = "210987654321"
DEPLOY_ROLE = f"arn:aws:iam::{MOTO_ACCOUNT}:role/llm-inf2-deploy"


@pytest.fixture
def config_dir(tmp_path):
    folder = tmp_path / "config"
    shutil.copytree(ROOT / "config", folder)
    return folder


def _pin(folder, env: str, account: str | None, region: str | None) -> None:
    path = folder / f"{env}.yaml"
    data = yaml.safe_load(path.read_text())
    data.update(account=account, region=region)
    path.write_text(yaml.safe_dump(data))


def _bare_environ(tmp_path, **extra: str) -> dict[str, str]:
    """No credentials anywhere boto3 looks: no AWS_* variables, an empty home, no instance metadata."""
    environ = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    environ.update(
        HOME=str(tmp_path / "home"),
        AWS_CONFIG_FILE=str(tmp_path / "home" / "config"),
        AWS_SHARED_CREDENTIALS_FILE=str(tmp_path / "home" / "credentials"),
        AWS_EC2_METADATA_DISABLED="true",
    )
    environ.update(extra)
    return environ


def _preflight(*args: str, environ: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "tools/preflight.py", *args], cwd=ROOT, env=environ, capture_output=True, text=True, timeout=60
    )


def _refusal(proc: subprocess.CompletedProcess) -> str:
    assert proc.returncode == 2 and proc.stdout == "", (proc.returncode, proc.stdout, proc.stderr)
    assert proc.stderr.count("\n") == 1, proc.stderr
    return proc.stderr.rstrip("\n")


# ---------------------------------------------------------------------------------------------- variables
VARIABLE_CASES = [
    (
        "deploy-role-missing",
        "dev",
        "deploy",
        {"PREFLIGHT_REGION": "us-east-1"},
        "preflight dev: AWS_DEPLOY_ROLE_ARN_DEV is not set: add it as a variable of the GitHub environment dev "
        "(Settings > Environments > dev)",
    ),
    (
        "diff-role-missing",
        "staging",
        "diff",
        {"PREFLIGHT_ROLE_ARN": " ", "PREFLIGHT_REGION": "us-east-1"},
        "preflight staging: AWS_DIFF_ROLE_ARN_STAGING is not set: add it as a repository variable (the diff job runs "
        "outside the GitHub environment)",
    ),
    (
        "region-missing",
        "dev",
        "deploy",
        {"PREFLIGHT_ROLE_ARN": DEPLOY_ROLE},
        "preflight dev: AWS_REGION_DEV is not set: add it as a repository variable (Settings > Secrets and variables > "
        "Actions > Variables)",
    ),
    (
        "not-a-role",
        "dev",
        "deploy",
        {"PREFLIGHT_ROLE_ARN": "llm-inf2-deploy", "PREFLIGHT_REGION": "us-east-1"},
        "preflight dev: AWS_DEPLOY_ROLE_ARN_DEV: got 'llm-inf2-deploy'; expected an IAM role ARN, "
        "arn:aws:iam::<12 digits>:role/<name>",
    ),
    (
        "not-a-region",
        "dev",
        "deploy",
        {"PREFLIGHT_ROLE_ARN": DEPLOY_ROLE, "PREFLIGHT_REGION": "US East"},
        "preflight dev: AWS_REGION_DEV: got 'US East'; expected a region such as us-east-1",
    ),
    (
        "prod-unpinned",
        "prod",
        "diff",
        {"PREFLIGHT_ROLE_ARN": DEPLOY_ROLE, "PREFLIGHT_REGION": "us-east-1"},
        "preflight prod: config/prod.yaml: account and region: null, and deploy.require_pinned is true: prod deploys "
        "only into the account and region its file names: set account: '<12 digits>' (the account of "
        "AWS_DEPLOY_ROLE_ARN_PROD) and region: <e.g. us-east-1> in config/prod.yaml",
    ),
]


@pytest.mark.parametrize(
    ("case", "env", "stage", "values", "expected"), VARIABLE_CASES, ids=[c[0] for c in VARIABLE_CASES]
)
def test_missing_or_wrong_variables_are_refused_in_one_line(tmp_path, case, env, stage, values, expected):
    proc = _preflight("variables", "--env", env, "--stage", stage, environ=_bare_environ(tmp_path, **values))
    assert _refusal(proc) == expected


def test_a_role_or_region_other_than_the_pinned_ones_is_refused(tmp_path, config_dir):
    _pin(config_dir, "prod", OTHER_ACCOUNT, "eu-west-1")
    args = ("variables", "--env", "prod", "--stage", "deploy", "--config-dir", str(config_dir))
    wrong_account = _bare_environ(tmp_path, PREFLIGHT_ROLE_ARN=DEPLOY_ROLE, PREFLIGHT_REGION="eu-west-1")
    assert _refusal(_preflight(*args, environ=wrong_account)).endswith(
        f"AWS_DEPLOY_ROLE_ARN_PROD is a role in account {MOTO_ACCOUNT}, but {config_dir}/prod.yaml pins account "
        f"{OTHER_ACCOUNT}: set AWS_DEPLOY_ROLE_ARN_PROD to prod's role"
    )
    role = DEPLOY_ROLE.replace(MOTO_ACCOUNT, OTHER_ACCOUNT)
    wrong_region = _bare_environ(tmp_path, PREFLIGHT_ROLE_ARN=role, PREFLIGHT_REGION="us-east-1")
    assert _refusal(_preflight(*args, environ=wrong_region)).endswith(
        f"AWS_REGION_PROD is us-east-1, but {config_dir}/prod.yaml pins region eu-west-1: set it to that"
    )
    right = _bare_environ(tmp_path, PREFLIGHT_ROLE_ARN=role, PREFLIGHT_REGION="eu-west-1")
    proc = _preflight(*args, environ=right)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("preflight prod deploy: AWS_DEPLOY_ROLE_ARN_PROD and AWS_REGION_PROD set")


# ----------------------------------------------------------------------------------------------- identity
def test_no_credentials_says_what_to_set_in_one_line(tmp_path):
    line = _refusal(_preflight("identity", "--env", "dev", environ=_bare_environ(tmp_path)))
    assert line == (
        "preflight dev: no AWS credentials: set AWS_PROFILE to a profile in ~/.aws/config (after `aws sso login "
        "--profile NAME` for SSO), or AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (and AWS_SESSION_TOKEN for "
        "temporary keys); and a region: AWS_REGION, or pin region: in config/dev.yaml"
    )
    missing = _bare_environ(tmp_path, AWS_PROFILE="ml-dev")
    assert _refusal(_preflight("identity", "--env", "dev", environ=missing)) == (
        "preflight dev: The config profile (ml-dev) could not be found: set AWS_PROFILE to a profile in "
        "~/.aws/config, or unset it"
    )


@pytest.fixture(scope="module")
def sts():
    """moto's server on a free loopback port: a real STS API for boto3."""
    with loopback_moto_server() as url:
        yield url


def _keys(tmp_path, endpoint: str, **extra: str) -> dict[str, str]:
    return _bare_environ(
        tmp_path, AWS_ACCESS_KEY_ID="testing", AWS_SECRET_ACCESS_KEY="testing", AWS_ENDPOINT_URL=endpoint, **extra
    )


def test_identity_compares_the_credentials_account_and_region_with_the_pinned_ones(tmp_path, config_dir, sts):
    args = ("identity", "--env", "prod", "--config-dir", str(config_dir))
    assert _refusal(_preflight(*args, environ=_keys(tmp_path, sts))) == (
        f"preflight prod: no AWS region: set AWS_REGION (or region in your profile), or pin region: in "
        f"{config_dir}/prod.yaml"
    )
    unpinned = _refusal(_preflight(*args, environ=_keys(tmp_path, sts, AWS_REGION="us-east-1")))
    assert "account and region: null, and deploy.require_pinned is true" in unpinned
    _pin(config_dir, "prod", OTHER_ACCOUNT, "us-east-1")
    assert _refusal(_preflight(*args, environ=_keys(tmp_path, sts, AWS_REGION="us-east-1"))) == (
        f"preflight prod: these credentials are for account {MOTO_ACCOUNT}, but {config_dir}/prod.yaml pins "
        f"account {OTHER_ACCOUNT}: use prod's credentials (profile or role)"
    )
    _pin(config_dir, "prod", MOTO_ACCOUNT, "us-east-1")
    assert _refusal(_preflight(*args, environ=_keys(tmp_path, sts, AWS_REGION="eu-west-1"))) == (
        f"preflight prod: the region is eu-west-1, but {config_dir}/prod.yaml pins region us-east-1: set AWS_REGION"
    )
    proc = _preflight(*args, environ=_keys(tmp_path, sts, AWS_REGION="us-east-1"))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == (
        f"preflight prod: credentials for account {MOTO_ACCOUNT} in us-east-1 ({config_dir}/prod.yaml pins account "
        f"{MOTO_ACCOUNT}, region us-east-1)\n"
    )


def test_credentials_sts_cannot_confirm_are_refused_in_one_line(tmp_path):
    """A closed port stands for an unreachable STS: boto3's own error, on one line."""
    environ = _keys(tmp_path, "http://127.0.0.1:9", AWS_REGION="us-east-1", AWS_MAX_ATTEMPTS="1")
    line = _refusal(_preflight("identity", "--env", "dev", environ=environ))
    assert line.startswith("preflight dev: STS could not confirm the credentials (Could not connect to the endpoint")


# ---------------------------------------------------------------------------------------------- approvals
def _environment(name: str, reviewers: int) -> dict:
    """GET /repos/{owner}/{repo}/environments/{name}, as GitHub's REST API documents its answer."""
    rules = [{"id": 3736, "node_id": "MDQ6R2F0ZTM3MzY=", "type": "wait_timer", "wait_timer": 30}]
    if reviewers:
        rules.append(
            {
                "id": 3755,
                "node_id": "MDQ6R2F0ZTM3NTU=",
                "prevent_self_review": False,
                "type": "required_reviewers",
                "reviewers": [
                    {"type": "User", "reviewer": {"login": f"octocat{i}", "id": i}} for i in range(reviewers)
                ],
            }
        )
    rules.append({"id": 3756, "node_id": "MDQ6R2F0ZTM3NTY=", "type": "branch_policy"})
    return {
        "id": 161088068,
        "node_id": "MDExOkVudmlyb25tZW50MTYxMDg4MDY4",
        "name": name,
        "url": f"https://api.github.com/repos/octo-org/llm-inf2/environments/{name}",
        "created_at": "2026-11-23T22:00:40Z",
        "updated_at": "2026-11-23T22:00:40Z",
        "can_admins_bypass": True,
        "protection_rules": rules,
        "deployment_branch_policy": {"protected_branches": False, "custom_branch_policies": True},
    }


@pytest.fixture
def github():
    """A loopback server answering the environments endpoint from `answers` ({name: (status, body)})."""
    answers: dict[str, tuple[int, dict]] = {}
    seen: list[tuple[str, str]] = []

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 - http.server's name
            seen.append((self.path, self.headers.get("Authorization", "")))
            name = self.path.rsplit("/", 1)[-1]
            status, body = answers.get(name, (404, {"message": "Not Found"}))
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    environ = {
        "GITHUB_API_URL": f"http://127.0.0.1:{server.server_address[1]}",
        "GITHUB_REPOSITORY": "octo-org/llm-inf2",
        "GH_TOKEN": "ghs_token",
    }
    yield answers, seen, environ
    server.shutdown()
    server.server_close()


def test_the_chain_checks_every_approval_environment_has_required_reviewers(github, monkeypatch):
    answers, seen, environ = github
    monkeypatch.chdir(ROOT)
    waves = load_chain("config")  # as the tool reads it: relative to the repository root
    answers["prod"] = (200, _environment("prod", reviewers=2))
    assert deploy_chain.check_approvals(waves, environ) == ["prod: 2 required reviewer(s)"]
    assert seen == [("/repos/octo-org/llm-inf2/environments/prod", "Bearer ghs_token")]  # only approval ones
    answers["prod"] = (200, _environment("prod", reviewers=0))
    with pytest.raises(deploy_chain.Refusal) as unprotected:
        deploy_chain.check_approvals(waves, environ)
    assert str(unprotected.value) == (
        "config/prod.yaml: deploy.approval: true, but the GitHub environment prod has no required reviewers: add "
        "them (Settings > Environments > prod > Required reviewers), or set deploy.approval: false"
    )
    del answers["prod"]
    with pytest.raises(deploy_chain.Refusal, match=r"environment prod does not exist \(a job would create it"):
        deploy_chain.check_approvals(waves, environ)
    answers["prod"] = (403, {"message": "Resource not accessible by integration"})
    with pytest.raises(deploy_chain.Refusal, match=r"HTTP 403 \(the plan job needs permissions: actions: read\)"):
        deploy_chain.check_approvals(waves, environ)


def test_the_plan_writes_every_wave_to_the_step_outputs(github):
    answers, _, environ = github
    answers["prod"] = (200, _environment("prod", reviewers=1))
    proc = subprocess.run(
        [sys.executable, "tools/deploy_chain.py", "--github-output"],
        cwd=ROOT,
        env={**os.environ, **environ},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    assert [line.split("=", 1)[0] for line in proc.stdout.splitlines()] == ["wave-1", "wave-2", "wave-3", "wave-4"]
    assert "prod: 1 required reviewer(s)" in proc.stderr


def test_the_approvals_check_without_a_token_says_what_it_needs(monkeypatch):
    monkeypatch.chdir(ROOT)
    with pytest.raises(deploy_chain.Refusal) as err:
        deploy_chain.check_approvals(load_chain("config"), {})
    assert str(err.value) == (
        "GITHUB_REPOSITORY and GH_TOKEN (the job's github.token) are needed to read the environments"
    )
