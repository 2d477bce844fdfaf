#!/usr/bin/env python3
"""Review summary of an infrastructure change: what a merge would add, change, replace or delete in AWS.

    python tools/review_diff.py --base origin/main [--env dev --env prod] [--output review.md]
    python tools/review_diff.py --base-dir cdk.out.base --head-dir cdk.out [--output review.md]

`--base REF` checks REF out into a temporary `git worktree`, synthesizes it and the working tree
offline (`python app.py` with CDK_OUTDIR / CDK_CONTEXT_JSON, one process per environment, no
credentials), then compares every stack. `--base-dir/--head-dir` compare two synthesized cloud
assemblies (a folder with manifest.json, or a folder of such folders, one per environment).

Every stack pair goes through @aws-cdk/cloudformation-diff (tools/cfn_diff.cjs), the engine of
`cdk diff --template`, pinned in package.json: its per-resource change impact (WILL_REPLACE,
MAY_REPLACE, WILL_DESTROY, WILL_ORPHAN), computed from the CloudFormation resource specification it
ships, is the replacement detection. On top of it this tool adds what the engine cannot see: a
renamed construct (same type removed and added under a new logical ID, i.e. a new, empty resource)
and what an endpoint update means for clients. The markdown is deterministic: sorted, no times, no
temporary paths.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from local.cloud_assembly import CloudAssemblyReader, StackArtifact, assembly_dirs  # noqa: E402
from tools import cost  # noqa: E402

MARKER = "<!-- review-diff -->"
REPLACING = ("WILL_REPLACE", "MAY_REPLACE")

# Resource types whose replacement or deletion loses data or breaks clients: (class, what is at stake).
SENSITIVE: dict[str, tuple[str, str]] = {
    "AWS::KMS::Key": ("stateful", "a new key; data encrypted under the old key needs the old key to be read"),
    "AWS::S3::Bucket": ("stateful", "a new, empty bucket; objects do not move"),
    "AWS::Logs::LogGroup": ("stateful", "a new, empty log group; past logs stay behind"),
    "AWS::SSM::Parameter": ("stateful", "the stored value (e.g. the last trained model prefix) starts over"),
    "AWS::DynamoDB::Table": ("stateful", "a new, empty table"),
    "AWS::EFS::FileSystem": ("stateful", "a new, empty file system"),
    "AWS::RDS::DBInstance": ("stateful", "a new database"),
    "AWS::RDS::DBCluster": ("stateful", "a new database cluster"),
    "AWS::ECR::Repository": ("stateful", "a new, empty image repository"),
    "AWS::SecretsManager::Secret": ("stateful", "a new secret value"),
    "AWS::SQS::Queue": ("stateful", "a new, empty queue; queued messages are lost"),
    "AWS::SageMaker::Endpoint": ("user-facing", "clients call the endpoint by name"),
    "AWS::SageMaker::EndpointConfig": ("user-facing", "the configuration the endpoint runs"),
    "AWS::SNS::Topic": ("user-facing", "a new topic ARN; subscribers (alarm e-mails) must subscribe again"),
    "AWS::StepFunctions::StateMachine": ("user-facing", "a new ARN; callers and execution history stay with the old"),
}
IAM_PREFIXES = ("AWS::IAM::",)
IAM_POLICY_TYPES = (
    "AWS::S3::BucketPolicy",
    "AWS::KMS::Key",
    "AWS::SNS::TopicPolicy",
    "AWS::SQS::QueuePolicy",
    "AWS::Lambda::Permission",
)
SG_TYPES = ("AWS::EC2::SecurityGroup", "AWS::EC2::SecurityGroupIngress", "AWS::EC2::SecurityGroupEgress")


class ReviewError(Exception):
    """A failure the tool reports as one line."""


# ------------------------------------------------------------------------------------------ assemblies
def read_assembly(folder: Path) -> dict[str, StackArtifact]:
    """Stacks of a cloud assembly, or of every assembly one level below `folder`, by stack name."""
    directories = assembly_dirs(folder)
    if not directories:
        raise ReviewError(f"{folder}: no manifest.json in it or in its sub-folders (synthesize first)")
    stacks: dict[str, StackArtifact] = {}
    for directory in directories:
        stacks.update(CloudAssemblyReader(directory).by_name())
    return stacks


# ----------------------------------------------------------------------------------------------- synth
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


def synth_tree(
    tree: Path, outdir: Path, envs: list[str], base: dict[str, StackArtifact] | None = None
) -> dict[str, str]:
    """Synthesize every env of the source tree `tree` into outdir/<env>; returns {env: why it was skipped}.
    `base`: the deployed side's stacks, which name what a failure means (a renamed acknowledged construct)."""
    procs = {}
    for env_name in envs:
        environ = dict(os.environ)
        environ.update(
            {
                "CDK_OUTDIR": str(outdir / env_name),
                "CDK_CONTEXT_JSON": json.dumps(_context(tree, env_name)),
                "PYTHONDONTWRITEBYTECODE": "1",
            }
        )
        procs[env_name] = subprocess.Popen(
            [sys.executable, "app.py"],
            cwd=tree,
            env=environ,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
    skipped = {}
    for env_name, proc in procs.items():
        _, err = proc.communicate(timeout=900)
        if proc.returncode == 0:
            continue
        last = (err.strip().splitlines() or ["(no output)"])[-1]
        if "no such file for env" in last:  # the environment does not exist on this side: nothing deployed
            skipped[env_name] = "no config file"
            continue
        renamed = MISSING_ACKNOWLEDGED.search(last)
        if renamed and base is not None:
            raise ReviewError(f"env {env_name}: {renamed_construct(env_name, *renamed.groups(), base)}")
        raise ReviewError(f"synth of {tree.name} env {env_name} failed: {last}")
    return skipped


# stacks/nag.py's error for an acknowledgment whose construct is gone: what a renamed construct gives
MISSING_ACKNOWLEDGED = re.compile(r"nag acknowledgment (\S+) points at missing ([A-Za-z0-9]+)/(\S+)")


def renamed_construct(env_name: str, rule: str, unit: str, path: str, base: dict[str, StackArtifact]) -> str:
    """One line: which deployed resources a renamed acknowledged construct replaces, and what to do instead."""
    found = []
    for name, art in sorted(base.items()):
        if not name.endswith(f"-{unit}") or _stack_env(name) != env_name:
            continue
        resources = art.template.get("Resources", {})
        prefix = f"/{name}/{path}/"
        for lid, construct in sorted(art.paths.items()):
            if construct.startswith(prefix) and lid in resources:
                rtype = resources[lid].get("Type", "?")
                stake = SENSITIVE.get(rtype, ("", "a new resource"))[1].split(";")[0]
                found.append(f"{rtype} `{lid}` ({stake})")
    what = ", ".join(found) if found else "every resource under it"
    return (
        f"construct {unit}/{path} is gone, and cdk-nag acknowledgments ({rule}, stacks/nag.py) name it: a renamed "
        f"construct gets new logical IDs, so CloudFormation replaces {what}; rename it back, or keep the logical "
        f"ID (override_logical_id) and move its acknowledgments in stacks/nag.py to the new path"
    )


def synth_ref(ref: str, workdir: Path, envs: list[str]) -> Path:
    """Check `ref` out into a temporary worktree, synthesize it into workdir/base, remove the worktree."""
    tree = workdir / "base-src"
    proc = subprocess.run(
        ["git", "worktree", "add", "--detach", "--quiet", str(tree), ref], cwd=ROOT, capture_output=True, text=True
    )
    if proc.returncode != 0:
        raise ReviewError(f"git worktree add {ref}: {(proc.stderr.strip().splitlines() or ['failed'])[-1]}")
    try:
        synth_tree(tree, workdir / "base", envs)
    finally:
        subprocess.run(["git", "worktree", "remove", "--force", str(tree)], cwd=ROOT, capture_output=True)
    return workdir / "base"


# ------------------------------------------------------------------------------------------------ diff
def run_engine(base: dict[str, StackArtifact], head: dict[str, StackArtifact]) -> dict[str, Any]:
    names = sorted(set(base) | set(head))
    request = {
        "stacks": [
            {
                "name": name,
                "base": str(base[name].template_file) if name in base else None,
                "head": str(head[name].template_file) if name in head else None,
                "paths": {**(base[name].paths if name in base else {}), **(head[name].paths if name in head else {})},
            }
            for name in names
        ]
    }
    proc = subprocess.run(
        ["node", str(ROOT / "tools" / "cfn_diff.cjs")],
        input=json.dumps(request),
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**os.environ, "FORCE_COLOR": "0"},
    )
    if proc.returncode != 0:
        raise ReviewError(f"cloudformation-diff failed: {(proc.stderr.strip().splitlines() or ['?'])[-1]}")
    return json.loads(proc.stdout)


BLOCKING = "blocking"  # the deploy fails, or data needs a manual step: never merge on autopilot
ATTENTION = "attention"  # replaced or deleted, clients or history affected; the deploy itself goes through
ROUTINE = "routine"  # a rollout the stack manages (an endpoint moving onto a new config)
SEVERITIES = (BLOCKING, ATTENTION, ROUTINE)
STATEFUL_REPLACEMENTS = ("REPLACED", "MAY BE REPLACED", "REPLACED BY RENAME", "MOVED")


@dataclass(frozen=True)
class Warning_:
    stack: str
    logical_id: str
    type: str
    kind: str  # REPLACED, MAY BE REPLACED, DELETED, ORPHANED, REPLACED BY RENAME, MOVED, NEW ENDPOINT,
    #            ENDPOINT UPDATE, INSTANCE TYPE ON AUTOSCALED VARIANT, EXPORT IN USE
    message: str
    severity: str = ATTENTION


@dataclass
class StackReport:
    name: str
    status: str  # changed, unchanged, added, removed
    added: list[dict] = field(default_factory=list)
    changed: list[dict] = field(default_factory=list)
    removed: list[dict] = field(default_factory=list)
    replaced: list[dict] = field(default_factory=list)
    text: str = ""
    iam: dict = field(default_factory=dict)
    security_groups: dict = field(default_factory=dict)
    other_sections: list[str] = field(default_factory=list)


@dataclass
class Review:
    title: str
    engine: str
    stacks: list[StackReport]
    warnings: list[Warning_]
    iam: list[str]
    security: list[str]
    settings: list[str]
    cost_rows: list[tuple[str, ...]]
    cost_notes: list[str]
    cost_totals: list[EnvironmentCost] = field(default_factory=list)

    @property
    def replaced(self) -> dict[str, list[str]]:
        """{stack: sorted logical ids the engine marks as (maybe) replaced}: what the tests pin down."""
        return {s.name: sorted(r["logicalId"] for r in s.replaced) for s in self.stacks if s.replaced}

    @property
    def blocking(self) -> list[tuple[str, str, str]]:
        return sorted((w.stack, w.logical_id, w.kind) for w in self.warnings if w.severity == BLOCKING)

    @property
    def flagged(self) -> list[tuple[str, str, str]]:
        return sorted((w.stack, w.logical_id, w.kind) for w in self.warnings)


def _replacing_properties(change: dict) -> list[str]:
    return sorted(name for name, impact in change["properties"].items() if impact in REPLACING)


def _ref(value: Any) -> str | None:
    if isinstance(value, dict):
        if "Ref" in value:
            return value["Ref"]
        att = value.get("Fn::GetAtt")
        if att:
            return att[0] if isinstance(att, list) else str(att).split(".")[0]
    return None


def _rollout(endpoint: dict) -> str:
    deploy = endpoint.get("Properties", {}).get("DeploymentConfig") or {}
    alarms = (deploy.get("AutoRollbackConfiguration") or {}).get("Alarms") or []
    rollback = f", rolled back on {len(alarms)} alarm(s)" if alarms else ", no automatic rollback"
    return _strategy(deploy) + rollback


def _strategy(deploy: dict) -> str:
    rolling = deploy.get("RollingUpdatePolicy")
    if rolling:
        batch = rolling.get("MaximumBatchSize", {})
        size = (
            f"{batch.get('Value')}% of capacity"
            if batch.get("Type") == "CAPACITY_PERCENT"
            else f"{batch.get('Value')} instance(s)"
        )
        return f"rolling deployment, batches of {size}, {rolling.get('WaitIntervalInSeconds')} s apart"
    blue_green = deploy.get("BlueGreenUpdatePolicy")
    if blue_green:
        routing = (blue_green.get("TrafficRoutingConfiguration") or {}).get("Type", "ALL_AT_ONCE")
        return f"blue/green deployment, traffic shifted {routing.lower().replace('_', ' ')}"
    return "blue/green deployment, all at once (SageMaker's default)"


def _endpoints_using(template: dict, config_id: str) -> list[tuple[str, dict]]:
    return sorted(
        (lid, res)
        for lid, res in template.get("Resources", {}).items()
        if res.get("Type") == "AWS::SageMaker::Endpoint"
        and _ref(res.get("Properties", {}).get("EndpointConfigName")) == config_id
    )


def analyse(
    base: dict[str, StackArtifact], head: dict[str, StackArtifact], engine: dict[str, Any]
) -> tuple[list[StackReport], list[Warning_], list[str], list[str]]:
    reports: list[StackReport] = []
    warnings: list[Warning_] = []
    iam_lines: list[str] = []
    sg_lines: list[str] = []
    removed_sensitive: list[tuple[str, dict]] = []
    added_by_type: dict[str, list[tuple[str, str]]] = defaultdict(list)
    templates = {name: art.template for name, art in head.items()}
    base_templates = {name: art.template for name, art in base.items()}

    for result in engine["stacks"]:
        name = result["name"]
        status = (
            "added"
            if name not in base
            else "removed"
            if name not in head
            else ("unchanged" if result["empty"] else "changed")
        )
        report = StackReport(name, status, text=result["text"], other_sections=result["otherSections"])
        for change in result["resources"]:
            if change["isAddition"]:
                report.added.append(change)
                added_by_type[change["type"]].append((name, change["logicalId"]))
            elif change["isRemoval"]:
                report.removed.append(change)
            else:
                report.changed.append(change)
                if change["impact"] in REPLACING:
                    report.replaced.append(change)
        reports.append(report)

        head_template = templates.get(name, {})
        base_template = base_templates.get(name, {})
        for change in report.replaced:
            rtype, lid = change["type"], change["logicalId"]
            kind = "REPLACED" if change["impact"] == "WILL_REPLACE" else "MAY BE REPLACED"
            because = ", ".join(_replacing_properties(change)) or "resource-level change"
            if rtype == "AWS::SageMaker::EndpointConfig":
                users = _endpoints_using(head_template, lid)
                endpoints = [e for e in users if not _endpoint_replaced(report, e[0])]
                blocked = [b for e, _ in endpoints for b in _autoscaled_type_changes(base_template, head_template, e)]
                if blocked:
                    warnings += [
                        Warning_(name, lid, rtype, "INSTANCE TYPE ON AUTOSCALED VARIANT", b, BLOCKING) for b in blocked
                    ]
                elif endpoints:
                    how = "; ".join(
                        f"endpoint `{e}` keeps its name and switches to the new config by {_rollout(r)}"
                        for e, r in endpoints
                    )
                    message = f"rolling replacement of the endpoint config ({because}): {how}"
                    warnings.append(Warning_(name, lid, rtype, kind, message, ROUTINE))
                else:
                    message = f"endpoint config replaced ({because}); no endpoint in this stack keeps using it"
                    warnings.append(Warning_(name, lid, rtype, kind, message, ROUTINE))
            elif rtype == "AWS::SageMaker::Endpoint":
                warnings.append(
                    Warning_(
                        name,
                        lid,
                        rtype,
                        "NEW ENDPOINT",
                        (
                            f"the endpoint itself is replaced ({because}): a new endpoint is created and the old one "
                            "deleted; clients see a new endpoint and no capacity while the new one starts"
                        ),
                    )
                )
            elif rtype in SENSITIVE:
                klass, stake = SENSITIVE[rtype]
                retained = base_template.get("Resources", {}).get(lid, {}).get("DeletionPolicy") == "Retain"
                tail = "; the old one is retained (DeletionPolicy Retain) but no longer managed" if retained else ""
                warnings.append(
                    Warning_(name, lid, rtype, kind, f"{klass}: {stake} ({because}){tail}", _severity(klass, kind))
                )
        for change in report.changed:
            if (
                change["type"] == "AWS::SageMaker::Endpoint"
                and change["impact"] not in REPLACING
                and ("EndpointConfigName" in change["properties"])
            ):
                endpoint = head_template.get("Resources", {}).get(change["logicalId"], {})
                blocked = _autoscaled_type_changes(base_template, head_template, change["logicalId"])
                if blocked:
                    warnings += [
                        Warning_(
                            name,
                            change["logicalId"],
                            change["type"],
                            "INSTANCE TYPE ON AUTOSCALED VARIANT",
                            b,
                            BLOCKING,
                        )
                        for b in blocked
                    ]
                    continue
                warnings.append(
                    Warning_(
                        name,
                        change["logicalId"],
                        change["type"],
                        "ENDPOINT UPDATE",
                        (f"same endpoint, new endpoint config: updated in place by {_rollout(endpoint)}"),
                        ROUTINE,
                    )
                )
        for change in report.removed:
            if change["type"] in SENSITIVE:
                removed_sensitive.append((name, change))

        for change in report.added + report.changed + report.removed:
            rtype = change["type"]
            verb = "added" if change["isAddition"] else "removed" if change["isRemoval"] else "changed"
            if rtype.startswith(IAM_PREFIXES) or (
                rtype in IAM_POLICY_TYPES
                and (rtype != "AWS::KMS::Key" or "KeyPolicy" in change["properties"] or verb != "changed")
            ):
                iam_lines.append(f"`{name}` {rtype} `{change['logicalId']}` {verb}")
            if rtype in SG_TYPES or "SecurityGroupIds" in change["properties"] or ("VpcConfig" in change["properties"]):
                sg_lines.append(f"`{name}` {rtype} `{change['logicalId']}` {verb}")
        report.iam = result["iam"]
        report.security_groups = result["securityGroups"]

    for name, change in sorted(removed_sensitive, key=lambda item: (item[0], item[1]["logicalId"])):
        rtype, lid = change["type"], change["logicalId"]
        klass, stake = SENSITIVE[rtype]
        fate = (
            "orphaned: retained by its DeletionPolicy, no longer managed by the stack"
            if change["impact"] == "WILL_ORPHAN"
            else "deleted"
        )
        same_stack = [lid2 for stack2, lid2 in added_by_type.get(rtype, []) if stack2 == name]
        other_stacks = [f"{stack2}/{lid2}" for stack2, lid2 in added_by_type.get(rtype, []) if stack2 != name]
        if same_stack:
            kind = "REPLACED BY RENAME"
            added = ", ".join(f"`{other}`" for other in sorted(same_stack))
            message = (
                f"{klass}: logical ID `{lid}` removed ({fate}) and {added} of the same type added: "
                f"a renamed construct is a replacement, {stake}"
            )
        elif other_stacks:
            kind = "MOVED"
            message = (
                f"{klass}: removed here ({fate}) and a {rtype} added in `{', '.join(sorted(other_stacks))}`: "
                f"moving between stacks is a replacement, {stake}"
            )
        else:
            kind = "ORPHANED" if change["impact"] == "WILL_ORPHAN" else "DELETED"
            message = f"{klass}: {fate}; {stake.split(';')[0]}"
        warnings.append(Warning_(name, lid, rtype, kind, message, _severity(klass, kind)))

    warnings += exports_in_use(base, head)
    # an endpoint and its config can both carry one blocked change: say it once
    warnings = list({(w.stack, w.kind, w.message): w for w in warnings}.values())
    warnings.sort(key=lambda w: (w.stack, w.logical_id, w.kind))
    return reports, warnings, sorted(set(iam_lines)), sorted(set(sg_lines))


def _severity(klass: str, kind: str) -> str:
    """A replaced stateful resource needs its data moved by hand: blocking. Anything else: attention."""
    return BLOCKING if klass == "stateful" and kind in STATEFUL_REPLACEMENTS else ATTENTION


def _variant_types(template: dict, endpoint_id: str) -> dict[str, Any]:
    """{variant name: instance type} of the config the endpoint `endpoint_id` points at in `template`."""
    resources = template.get("Resources", {})
    config_id = _ref(resources.get(endpoint_id, {}).get("Properties", {}).get("EndpointConfigName"))
    variants = resources.get(config_id or "", {}).get("Properties", {}).get("ProductionVariants") or []
    return {str(v.get("VariantName")): v.get("InstanceType") for v in variants}


def _scalable_targets(template: dict, endpoint_id: str) -> list[str]:
    """Scalable targets on the variants of `endpoint_id` (their ResourceId names the endpoint's generated name)."""
    return sorted(
        lid
        for lid, res in template.get("Resources", {}).items()
        if res.get("Type") == "AWS::ApplicationAutoScaling::ScalableTarget"
        and res.get("Properties", {}).get("ScalableDimension") == "sagemaker:variant:DesiredInstanceCount"
        and f'"{endpoint_id}"' in json.dumps(res.get("Properties", {}).get("ResourceId"))
    )


def _autoscaled_type_changes(base_template: dict, head_template: dict, endpoint_id: str) -> list[str]:
    """Why the update of an endpoint kept by name fails: a variant changes instance type while it is autoscaled.

    SageMaker refuses UpdateEndpoint when it changes the instance type of a variant registered as a
    scalable target ("Update endpoints that use auto scaling", SageMaker developer guide); the CloudFormation
    update fails and rolls back. The registration deployed is the base's."""
    targets = _scalable_targets(base_template, endpoint_id)
    if not targets or endpoint_id not in head_template.get("Resources", {}):
        return []
    before, after = _variant_types(base_template, endpoint_id), _variant_types(head_template, endpoint_id)
    return [
        f"endpoint `{endpoint_id}` variant {variant}: instance type {before[variant]} -> {after[variant]} while "
        f"scalable target `{', '.join(targets)}` is registered: SageMaker refuses that UpdateEndpoint and the "
        "stack update fails and rolls back. Deploy once with autoscaling off (or deregister the scalable target: "
        "aws application-autoscaling deregister-scalable-target --service-namespace sagemaker "
        "--scalable-dimension sagemaker:variant:DesiredInstanceCount --resource-id "
        f"endpoint/<name>/variant/{variant}), then deploy the new type"
        for variant in sorted(set(before) & set(after))
        if before[variant] != after[variant]
    ]


def _imports(value: Any) -> set[str]:
    """Every literal export name a template fragment imports with Fn::ImportValue."""
    if isinstance(value, dict):
        found = set()
        for key, inner in value.items():
            if key == "Fn::ImportValue" and isinstance(inner, str):
                found.add(inner)
            else:
                found |= _imports(inner)
        return found
    if isinstance(value, list):
        return set().union(*(_imports(v) for v in value)) if value else set()
    return set()


def _exports(template: dict) -> dict[str, str]:
    """{export name: output id} of a template's literal Export names."""
    return {
        out["Export"]["Name"]: oid
        for oid, out in (template.get("Outputs") or {}).items()
        if isinstance(out.get("Export", {}).get("Name"), str)
    }


def exports_in_use(base: dict[str, StackArtifact], head: dict[str, StackArtifact]) -> list[Warning_]:
    """A removed export that a deployed (base) stack imports: CloudFormation refuses to delete an export in use.

    The exporting stack deploys first (the importers depend on it), so while the deployed importer still
    holds the old Fn::ImportValue, the exporter's update fails, even when the new importer no longer needs it."""
    imported_by: dict[str, set[str]] = defaultdict(set)
    for name, art in base.items():
        for export in _imports(art.template):
            imported_by[export].add(name)
    found = []
    for name in sorted(set(base)):
        removed = set(_exports(base[name].template)) - set(_exports(head[name].template) if name in head else {})
        for export in sorted(removed):
            users = sorted(imported_by.get(export, set()) - {name})
            if not users:
                continue
            found.append(
                Warning_(
                    name,
                    _exports(base[name].template)[export],
                    "AWS::CloudFormation::Output",
                    "EXPORT IN USE",
                    (
                        f"export `{export}` is removed while deployed stack(s) {', '.join(f'`{u}`' for u in users)} "
                        "import it: CloudFormation refuses to delete an export in use, so this stack's update fails. "
                        "Keep the export one more deploy (CDK: `stack.export_value(...)` of the old value), deploy, "
                        "then remove it; or rename back"
                    ),
                    BLOCKING,
                )
            )
    return found


def _endpoint_replaced(report: StackReport, logical_id: str) -> bool:
    return any(c["logicalId"] == logical_id for c in report.replaced)


def stack_settings(base: dict[str, StackArtifact], head: dict[str, StackArtifact]) -> list[str]:
    lines = []
    for name in sorted(set(base) & set(head)):
        before, after = base[name].termination_protection, head[name].termination_protection
        if before != after:
            lines.append(f"`{name}`: termination protection {'on' if before else 'off'} -> {'on' if after else 'off'}")
    return lines


# ------------------------------------------------------------------------------------------------ cost
def _delta(old: float | None, new: float | None, unit: str) -> str:
    if old is None or new is None:
        return "n/a"
    diff = new - old
    return "±0" if abs(diff) < 0.005 else f"{'+' if diff > 0 else '-'}${abs(diff):,.2f}{unit}"


TOTALS = (
    ("min", "/month", "always-on at min scale"),
    ("max", "/month", "always-on at max scale"),
    ("run", "/run", "one execution of every workflow at its bound"),
)


@dataclass(frozen=True)
class EnvironmentCost:
    """An environment's totals on both sides ({part of TOTALS: USD or None}); emulated: never deployed to AWS."""

    env: str
    emulated: bool
    old: dict[str, float | None]
    new: dict[str, float | None]


def _stack_env(stack_name: str) -> str:
    """`<app>-<env>-<Unit>` (AppConfig.stack_id): the environment; env names have no hyphen, units none either."""
    parts = stack_name.rsplit("-", 2)
    return parts[1] if len(parts) == 3 else ""


def aws_environments(config_dir: Path = ROOT / "config") -> set[str]:
    """The environments deploy.yml deploys (a deploy: section); the others run only on the emulator."""
    from stacks.config.loader import deployed_environments

    return set(deployed_environments(config_dir))


def _totals(side: dict[str, StackArtifact], table: cost.PriceTable) -> dict[str, float | None]:
    lines = [line for result in cost.estimate_stacks(side, table) for line in result.lines]
    parts = cost.total_lines(lines)
    return {part: cost.total(parts[part]) for part, _, _ in TOTALS}


def environment_costs(
    base: dict[str, StackArtifact], head: dict[str, StackArtifact], table: cost.PriceTable, aws: set[str]
) -> list[EnvironmentCost]:
    """Each environment's totals, base and head; environments outside `aws` are emulated (never billed)."""

    def of(side: dict[str, StackArtifact], env: str) -> dict[str, StackArtifact]:
        return {name: art for name, art in side.items() if _stack_env(name) == env}

    envs = sorted({_stack_env(name) for name in [*base, *head]})
    return [
        EnvironmentCost(env, env not in aws, _totals(of(base, env), table), _totals(of(head, env), table))
        for env in envs
    ]


def cost_delta(
    base: dict[str, StackArtifact], head: dict[str, StackArtifact], table: cost.PriceTable
) -> tuple[list[tuple[str, ...]], list[str]]:
    """The priced items that change (type, count or price); unchanged items are counted in a note."""

    def lines(side: dict[str, StackArtifact]) -> dict[str, cost.Line]:
        return {line.key: line for result in cost.estimate_stacks(side, table) for line in result.lines}

    before, after = lines(base), lines(head)
    rows: list[tuple[str, ...]] = []
    notes: set[str] = set()
    unchanged = 0
    for key in list(after) + [k for k in before if k not in after]:
        old, new = before.get(key), after.get(key)
        ref = new or old
        unit = "/month" if ref.hours is None else "/run"
        old_type = f"{old.count} x {old.instance_type}" if old else "-"
        new_type = f"{new.count} x {new.instance_type}" if new else "-"
        delta = _delta(old.usd_total if old else 0.0, new.usd_total if new else 0.0, unit)
        if old_type == new_type and delta == "±0":
            unchanged += 1
            continue
        rows.append(
            (
                ref.label,
                old_type if old_type == new_type else f"{old_type} -> {new_type}",
                _usd(old, unit),
                _usd(new, unit),
                delta,
            )
        )
        for line in (old, new):
            if line and line.problem:
                notes.add(f"not priced: {line.problem}")
            if line and line.note:
                notes.add(f"{line.label}: {line.note}")
    if unchanged:
        notes.add(f"{unchanged} unchanged item(s) not shown")
    return rows, sorted(notes)


def _total_cell(old: float | None, new: float | None, unit: str) -> str:
    delta = _delta(old, new, unit)
    shown = f"**{delta}**" if delta not in ("±0", "n/a") else delta
    return f"{cost.money(old)} -> {cost.money(new)}{unit} ({shown})"


def _sum_or_none(values: list[float | None]) -> float | None:
    return None if any(v is None for v in values) else sum(values)


def totals_table(totals: list[EnvironmentCost]) -> list[str]:
    """Per environment, base -> head (delta): the AWS ones and their sum, then the emulated ones apart."""
    out = ["| Environment | " + " | ".join(label.capitalize() for _, _, label in TOTALS) + " |"]
    out.append("|" + " --- |" * (len(TOTALS) + 1))

    def row(label: str, old: dict, new: dict) -> str:
        return f"| {label} | " + " | ".join(_total_cell(old[p], new[p], unit) for p, unit, _ in TOTALS) + " |"

    billed = [t for t in totals if not t.emulated]
    out += [row(f"`{t.env}`", t.old, t.new) for t in billed]
    if billed:
        old = {p: _sum_or_none([t.old[p] for t in billed]) for p, _, _ in TOTALS}
        new = {p: _sum_or_none([t.new[p] for t in billed]) for p, _, _ in TOTALS}
        out.append(row("**AWS, all environments**", old, new))
    out += [
        row(f"`{t.env}` (emulated on one machine: never billed, not in the sum)", t.old, t.new)
        for t in totals
        if t.emulated
    ]
    return out


def _usd(line: cost.Line | None, unit: str) -> str:
    if line is None:
        return "-"
    return "n/a" if line.usd_total is None else cost.money(line.usd_total) + unit


# -------------------------------------------------------------------------------------------- markdown
def review(
    base: dict[str, StackArtifact], head: dict[str, StackArtifact], title: str, table: cost.PriceTable | None = None
) -> Review:
    engine = run_engine(base, head)
    reports, warnings, iam_lines, sg_lines = analyse(base, head, engine)
    table = table or cost.PriceTable.load()
    rows, notes = cost_delta(base, head, table)
    totals = environment_costs(base, head, table, aws_environments())
    return Review(
        title, engine["engine"], reports, warnings, iam_lines, sg_lines, stack_settings(base, head), rows, notes, totals
    )


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def _table(rows: list[list[str]]) -> list[str]:
    """A markdown table from the engine's summary rows (first row: header)."""
    header = "| " + " | ".join(_cell(c) or " " for c in rows[0]) + " |"
    return [header, "|" + " --- |" * len(rows[0])] + [
        "| " + " | ".join(_cell(c).replace("\n", "<br>") for c in row) + " |" for row in rows[1:]
    ]


def _details(summary: str, body: list[str]) -> list[str]:
    return [f"<details><summary>{summary}</summary>", "", *body, "", "</details>", ""]


def render(result: Review, table: cost.PriceTable | None = None, max_chars: int = 60000) -> str:
    """Markdown; the collapsible details are left out beyond max_chars (GitHub comments hold 65,536)."""
    table = table or cost.PriceTable.load()
    changed = [s for s in result.stacks if s.status != "unchanged"]
    out = [MARKER, f"## Infrastructure review: {result.title}", ""]
    if not changed:
        out += ["No infrastructure changes: every stack template is identical.", ""]
    headings = {
        BLOCKING: ":no_entry: {n} blocking: the deploy fails or needs a manual step",
        ATTENTION: ":warning: {n} stateful or user-facing resource(s) replaced or deleted",
        ROUTINE: "{n} routine rollout(s) the stack manages",
    }
    for severity in SEVERITIES:
        group = [w for w in result.warnings if w.severity == severity]
        if group:
            out += [f"### {headings[severity].format(n=len(group))}", ""]
            out += [f"- **{w.kind}** `{w.stack}` `{w.logical_id}` ({w.type}): {w.message}" for w in group] + [""]
    if changed and not result.blocking:
        out += ["Nothing blocking: no deploy failure or manual step found.", ""]
    if changed and not [w for w in result.warnings if w.severity != ROUTINE]:
        out += ["No stateful or user-facing resource is replaced or deleted.", ""]
    if changed:
        out += ["| Stack | Status | Added | Changed | Removed | Replaced |", "| --- | --- | --- | --- | --- | --- |"]
        for s in result.stacks:
            replaced = ", ".join(f"`{c['logicalId']}`" for c in s.replaced) or "-"
            out.append(
                f"| `{s.name}` | {s.status} | {len(s.added)} | {len(s.changed)} | {len(s.removed)} | {replaced} |"
            )
        out.append("")
    if result.settings:
        out += ["### Stack settings", ""] + [f"- {line}" for line in result.settings] + [""]
    details: list[list[str]] = []
    if result.iam or any(s.iam.get("changed") for s in result.stacks):
        out += ["### IAM changes", ""]
        if any(s.iam.get("broadened") for s in result.stacks):
            out += ["**Permissions are broadened** (new allow statements or managed policies).", ""]
        out += [f"- {line}" for line in result.iam] + [""]
        for s in result.stacks:
            for caption, rows in (
                ("IAM statements", s.iam.get("statements", [])),
                ("managed policies", s.iam.get("managedPolicies", [])),
            ):
                if len(rows) > 1:
                    details.append(_details(f"<code>{s.name}</code>: {caption}", _table(rows)))
    if result.security or any(s.security_groups.get("changed") for s in result.stacks):
        out += ["### Security-group changes", ""] + [f"- {line}" for line in result.security] + [""]
        for s in result.stacks:
            rows = s.security_groups.get("rules", [])
            if len(rows) > 1:
                details.append(_details(f"<code>{s.name}</code>: security-group rules", _table(rows)))
    out += [
        f"### Cost (on-demand: SageMaker, PrivateLink; what changes, then each environment's totals; "
        f"tools/prices.json as of {table.as_of}, {table.hours_per_month:g} h/month)",
        "",
    ]
    if result.cost_rows:
        out += ["| Item | Instances | Base | Head | Delta |", "| --- | --- | --- | --- | --- |"]
        out += ["| " + " | ".join(_cell(c) for c in row) + " |" for row in result.cost_rows]
        out.append("")
    elif result.cost_totals:
        out += ["No priced item changes.", ""]
    if result.cost_totals:
        out += totals_table(result.cost_totals) + [""]
    else:
        out += ["No endpoint or training job in either side.", ""]
    out += [f"- {note}" for note in result.cost_notes] + ([""] if result.cost_notes else [])
    for s in changed:
        if s.text.strip():
            details.append(_details(f"<code>{s.name}</code>: cdk diff", ["```diff", s.text.rstrip(), "```"]))
    footer = f"<sub>Diff engine: {result.engine} (the engine of `cdk diff --template`).</sub>"
    used = sum(len(line) + 1 for line in out) + len(footer) + 200
    left_out = []
    for block in details:
        size = sum(len(line) + 1 for line in block)
        if max_chars and used + size > max_chars:
            left_out.append(block[0].removeprefix("<details><summary>").removesuffix("</summary>"))
            continue
        out += block
        used += size
    if left_out:
        out += [
            f"Left out to stay under {max_chars:,} characters (run `make review` for everything): "
            + "; ".join(left_out),
            "",
        ]
    out.append(footer)
    return "\n".join(out) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    side = parser.add_mutually_exclusive_group(required=True)
    side.add_argument("--base", metavar="REF", help="git ref to compare against, e.g. origin/main")
    side.add_argument("--base-dir", type=Path, help="a synthesized cloud assembly (or a folder of them)")
    parser.add_argument("--head-dir", type=Path, help="a synthesized cloud assembly; default: synthesize the tree")
    parser.add_argument("--env", action="append", help="environment(s) to synthesize; default: every config/*.yaml")
    parser.add_argument("--output", type=Path, help="write the markdown here too (it always goes to stdout)")
    parser.add_argument("--max-chars", type=int, default=60000, help="0: no limit; default fits a PR comment")
    args = parser.parse_args(argv)
    envs = args.env or sorted(p.stem for p in (ROOT / "config").glob("*.yaml"))
    if args.output:
        args.output.unlink(missing_ok=True)  # a failed run leaves no review of an earlier one behind
    try:
        markdown = _run(args, envs)
    except ReviewError as err:
        print(f"review error: {err}", file=sys.stderr)
        return 2
    sys.stdout.write(markdown)
    if args.output:
        partial = args.output.with_name(args.output.name + ".partial")
        partial.write_text(markdown, encoding="utf-8")
        os.replace(partial, args.output)  # whole or absent, never half written
    return 0


def _run(args: argparse.Namespace, envs: list[str]) -> str:
    with tempfile.TemporaryDirectory(prefix="review-") as tmp:
        workdir = Path(tmp)
        if args.base:
            base_dir = synth_ref(args.base, workdir, envs)
            title = f"`{args.base}` -> working tree"
        else:
            base_dir = args.base_dir
            title = f"`{args.base_dir.as_posix()}` -> `{(args.head_dir or Path('working tree')).as_posix()}`"
        base = read_assembly(base_dir) if base_dir.exists() else {}
        if args.head_dir is None:
            synth_tree(ROOT, workdir / "head", envs, base=base)
            head_dir = workdir / "head"
        else:
            head_dir = args.head_dir
        head = read_assembly(head_dir)
        return render(review(base, head, title), max_chars=args.max_chars)


if __name__ == "__main__":
    sys.exit(main())
