#!/usr/bin/env python3
"""The deploy chain of config/*.yaml, as deploy.yml runs it: waves of environments, each after the one before.

    tools/deploy_chain.py                    # the chain, one line per wave
    tools/deploy_chain.py --github-output    # deploy.yml's plan job: wave-1=<json> ... for $GITHUB_OUTPUT

Each config's `deploy:` section places it (stacks/config/deploy.py); a bad chain fails with one ConfigError line.
With --github-output it also checks, for every environment with `deploy.approval: true`, that its GitHub
environment exists and has required reviewers (GitHub's REST API, GET /repos/{repo}/environments/{name}, with
GITHUB_TOKEN and actions: read): GitHub creates an environment a job names without any protection, so a
missing or unprotected one would deploy without approval. Exit 2 with one line on any refusal.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from stacks.config import ConfigError  # noqa: E402
from stacks.config.deploy import MAX_WAVES, Stage  # noqa: E402
from stacks.config.loader import load_chain  # noqa: E402


class Refusal(Exception):
    """What blocks the chain, in one line."""


def describe(waves: list[list[Stage]]) -> list[str]:
    """One line per wave: its environments, each with what it waits for and requires."""
    lines = []
    for number, wave in enumerate(waves, start=1):
        parts = []
        for stage in wave:
            notes = [f"after {stage.deploy.after}"] if stage.deploy.after else []
            if stage.deploy.approval:
                notes.append("approval")
            if stage.deploy.require_pinned:
                notes.append(f"pinned to {stage.account}/{stage.region}" if stage.account else "pin required")
            parts.append(f"{stage.name} ({', '.join(notes)})" if notes else stage.name)
        lines.append(f"wave {number}: {', '.join(parts)}")
    return lines


def github_outputs(waves: list[list[Stage]]) -> list[str]:
    """`wave-N=<json matrix entries>` for every wave job of deploy.yml; an unused wave gets []."""
    padded = waves + [[]] * (MAX_WAVES - len(waves))
    return [
        f"wave-{n}={json.dumps([stage.matrix_entry() for stage in wave], separators=(',', ':'))}"
        for n, wave in enumerate(padded, start=1)
    ]


def required_reviewers(environment: dict) -> list[dict]:
    """The reviewers of a GitHub environment's `required_reviewers` protection rule (REST API shape)."""
    rules = environment.get("protection_rules") or []
    return [r for rule in rules if rule.get("type") == "required_reviewers" for r in rule.get("reviewers") or []]


def fetch_environment(name: str, environ: dict[str, str]) -> dict | None:
    """GET /repos/{repo}/environments/{name}; None when it does not exist (404)."""
    api = environ.get("GITHUB_API_URL", "https://api.github.com").rstrip("/")
    repo, token = environ.get("GITHUB_REPOSITORY"), environ.get("GH_TOKEN") or environ.get("GITHUB_TOKEN")
    if not repo or not token:
        raise Refusal("GITHUB_REPOSITORY and GH_TOKEN (the job's github.token) are needed to read the environments")
    request = urllib.request.Request(
        f"{api}/repos/{repo}/environments/{urllib.parse.quote(name, safe='')}",
        headers={
            "Accept": "application/vnd.github+json",
            "Authorization": f"Bearer {token}",
            "X-GitHub-Api-Version": "2022-11-28",
        },
    )
    try:
        with urllib.request.urlopen(request, timeout=30) as response:  # noqa: S310 - the GitHub API URL
            return json.load(response)
    except urllib.error.HTTPError as err:
        if err.code == 404:
            return None
        raise Refusal(
            f"GitHub API: environment {name}: HTTP {err.code} (the plan job needs permissions: actions: read)"
        ) from None


def check_approvals(waves: list[list[Stage]], environ: dict[str, str]) -> list[str]:
    """Every approval environment has required reviewers on GitHub; one line each."""
    lines = []
    for stage in (s for wave in waves for s in wave if s.deploy.approval):
        environment = fetch_environment(stage.name, environ)
        where = f"Settings > Environments > {stage.name} > Required reviewers"
        if environment is None:
            raise Refusal(
                f"{stage.source}: deploy.approval: true, but the GitHub environment {stage.name} does not exist "
                f"(a job would create it unprotected): create it with required reviewers ({where})"
            )
        reviewers = required_reviewers(environment)
        if not reviewers:
            raise Refusal(
                f"{stage.source}: deploy.approval: true, but the GitHub environment {stage.name} has no required "
                f"reviewers: add them ({where}), or set deploy.approval: false"
            )
        lines.append(f"{stage.name}: {len(reviewers)} required reviewer(s)")
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config-dir", default=os.path.relpath(ROOT / "config"), help="default: the repository's")
    parser.add_argument("--github-output", action="store_true", help="wave-N= lines; checks the approvals too")
    args = parser.parse_args(argv)
    try:
        waves = load_chain(args.config_dir)
        notes = check_approvals(waves, dict(os.environ)) if args.github_output else []
    except (ConfigError, Refusal) as err:
        print(f"deploy chain: {err}", file=sys.stderr)
        return 2
    for line in describe(waves) + notes:
        print(line, file=sys.stderr if args.github_output else sys.stdout)
    if args.github_output:
        print("\n".join(github_outputs(waves)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
