"""Offline synthesis of a source tree, one `python app.py` per environment, as `npx cdk synth` runs it."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

from local.cloud_assembly import StackArtifact
from tools.review_diff.assembly import stack_env
from tools.review_diff.model import ReviewError
from tools.review_diff.resources import SENSITIVE

# stacks/nag.py's error for an acknowledgment whose construct is gone: what a renamed construct gives
MISSING_ACKNOWLEDGED = re.compile(r"nag acknowledgment (\S+) points at missing ([A-Za-z0-9]+)/(\S+)")


def _context(tree: Path, env_name: str) -> dict[str, Any]:
    """What `npx cdk synth -c env=NAME` hands app.py: cdk.json context plus the CLI's metadata switches."""
    cdk_json = json.loads((tree / "cdk.json").read_text(encoding="utf-8"))
    return {
        **cdk_json.get("context", {}),
        "aws:cdk:enable-path-metadata": cdk_json.get("pathMetadata", True),
        "aws:cdk:enable-asset-metadata": True,
        "aws:cdk:version-reporting": cdk_json.get("versionReporting", True),
        "env": env_name,
    }


def _start(tree: Path, outdir: Path, env_name: str) -> subprocess.Popen:
    """One app.py process for one environment; every environment synthesizes at once."""
    environ = dict(os.environ)
    environ.update(
        {
            "CDK_OUTDIR": str(outdir / env_name),
            "CDK_CONTEXT_JSON": json.dumps(_context(tree, env_name)),
            "PYTHONDONTWRITEBYTECODE": "1",
        }
    )
    return subprocess.Popen(
        [sys.executable, "app.py"], cwd=tree, env=environ, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


def synth_tree(
    tree: Path, outdir: Path, envs: list[str], base: dict[str, StackArtifact] | None = None
) -> dict[str, str]:
    """Synthesize every env of the source tree `tree` into outdir/<env>; returns {env: why it was skipped}.
    `base`: the deployed side's stacks, which name what a failure means (a renamed acknowledged construct)."""
    procs = {env_name: _start(tree, outdir, env_name) for env_name in envs}
    skipped = {}
    for env_name, proc in procs.items():
        _, err = proc.communicate(timeout=900)
        if proc.returncode == 0:
            continue
        last = (err.strip().splitlines() or ["(no output)"])[-1]
        if "no such file for env" in last:  # the environment does not exist on this side: nothing deployed
            skipped[env_name] = "no config file"
            continue
        raise _failure(tree, env_name, last, base)
    return skipped


def _failure(tree: Path, env_name: str, last: str, base: dict[str, StackArtifact] | None) -> ReviewError:
    """A failed synth as one line; a renamed acknowledged construct says which deployed resources it replaces."""
    renamed = MISSING_ACKNOWLEDGED.search(last)
    if renamed and base is not None:
        return ReviewError(f"env {env_name}: {renamed_construct(env_name, *renamed.groups(), base)}")
    return ReviewError(f"synth of {tree.name} env {env_name} failed: {last}")


def _resources_under(env_name: str, unit: str, path: str, base: dict[str, StackArtifact]) -> list[str]:
    """The deployed resources of construct unit/path: `type `id` (what is at stake)` each."""
    found = []
    for name, art in sorted(base.items()):
        if not name.endswith(f"-{unit}") or stack_env(name) != env_name:
            continue
        resources = art.template.get("Resources", {})
        prefix = f"/{name}/{path}/"
        for lid, construct in sorted(art.paths.items()):
            if construct.startswith(prefix) and lid in resources:
                rtype = resources[lid].get("Type", "?")
                stake = SENSITIVE.get(rtype, ("", "a new resource"))[1].split(";")[0]
                found.append(f"{rtype} `{lid}` ({stake})")
    return found


def renamed_construct(env_name: str, rule: str, unit: str, path: str, base: dict[str, StackArtifact]) -> str:
    """One line: which deployed resources a renamed acknowledged construct replaces, and what to do instead."""
    what = ", ".join(_resources_under(env_name, unit, path, base)) or "every resource under it"
    return (
        f"construct {unit}/{path} is gone, and cdk-nag acknowledgments ({rule}, stacks/nag.py) name it: a renamed "
        f"construct gets new logical IDs, so CloudFormation replaces {what}; rename it back, or keep the logical "
        f"ID (override_logical_id) and move its acknowledgments in stacks/nag.py to the new path"
    )
