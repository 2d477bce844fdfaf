"""Classification of the engine's diff: which changes lose data, break clients, fail the deploy, or are routine."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from local.cloud_assembly import StackArtifact
from tools.review_diff.endpoints import autoscaled_type_changes, endpoints_using, rollout
from tools.review_diff.exports import exports_in_use
from tools.review_diff.model import STATEFUL_REPLACEMENTS, Analysis, Kind, ReviewWarning, Severity, StackReport
from tools.review_diff.resources import IAM_POLICY_TYPES, IAM_PREFIXES, REPLACING, SENSITIVE, SG_TYPES


def analyse(base: dict[str, StackArtifact], head: dict[str, StackArtifact], engine: dict[str, Any]) -> Analysis:
    """Every stack's report and the warnings across them; per stack, replacements come before endpoint updates
    (of one blocked change carried by an endpoint and its config, the endpoint's warning is kept)."""
    reports = [_stack_report(result, base, head) for result in engine["stacks"]]
    warnings: list[ReviewWarning] = []
    for report in reports:
        before = base[report.name].template if report.name in base else {}
        after = head[report.name].template if report.name in head else {}
        warnings += [w for change in report.replaced for w in _replacement(report, change, before, after)]
        warnings += [w for change in report.changed for w in _endpoint_update(report.name, change, before, after)]
    warnings += _removals(reports)
    warnings += [w for report in reports for w in _hosting_switch(report)]
    warnings += exports_in_use(base, head)
    iam, security = _access_lines(reports)
    return Analysis(reports, _deduplicated(warnings), iam, security)


def _status(name: str, base: dict, head: dict, empty: bool) -> str:
    if name not in base:
        return "added"
    if name not in head:
        return "removed"
    return "unchanged" if empty else "changed"


def _stack_report(result: dict[str, Any], base: dict, head: dict) -> StackReport:
    """The engine's resources of one stack sorted into added, removed, changed and (of those) replaced."""
    name = result["name"]
    report = StackReport(
        name,
        _status(name, base, head, result["empty"]),
        text=result["text"],
        iam=result["iam"],
        security_groups=result["securityGroups"],
        other_sections=result["otherSections"],
    )
    for change in result["resources"]:
        if change["isAddition"]:
            report.added.append(change)
        elif change["isRemoval"]:
            report.removed.append(change)
        else:
            report.changed.append(change)
            if change["impact"] in REPLACING:
                report.replaced.append(change)
    return report


def _severity(klass: str, kind: Kind) -> Severity:
    """A replaced stateful resource needs its data moved by hand: blocking. Anything else: attention."""
    return Severity.BLOCKING if klass == "stateful" and kind in STATEFUL_REPLACEMENTS else Severity.ATTENTION


def _replacing_properties(change: dict) -> list[str]:
    return sorted(name for name, impact in change["properties"].items() if impact in REPLACING)


def _replacement(report: StackReport, change: dict, before: dict, after: dict) -> list[ReviewWarning]:
    """A resource the engine says is (maybe) replaced: what that means for its type."""
    rtype, lid = change["type"], change["logicalId"]
    kind = Kind.REPLACED if change["impact"] == "WILL_REPLACE" else Kind.MAY_BE_REPLACED
    because = ", ".join(_replacing_properties(change)) or "resource-level change"
    if rtype == "AWS::SageMaker::EndpointConfig":
        return _config_replaced(report, change, kind, because, (before, after))
    if rtype == "AWS::SageMaker::Endpoint":
        message = (
            f"the endpoint itself is replaced ({because}): a new endpoint is created and the old one "
            "deleted; clients see a new endpoint and no capacity while the new one starts"
        )
        return [ReviewWarning(report.name, lid, rtype, Kind.NEW_ENDPOINT, message)]
    if rtype not in SENSITIVE:
        return []
    klass, stake = SENSITIVE[rtype]
    retained = before.get("Resources", {}).get(lid, {}).get("DeletionPolicy") == "Retain"
    tail = "; the old one is retained (DeletionPolicy Retain) but no longer managed" if retained else ""
    message = f"{klass}: {stake} ({because}){tail}"
    return [ReviewWarning(report.name, lid, rtype, kind, message, _severity(klass, kind))]


def _config_replaced(
    report: StackReport, change: dict, kind: Kind, because: str, sides: tuple[dict, dict]
) -> list[ReviewWarning]:
    """A new endpoint config: routine when the endpoints kept by name roll onto it, blocking when one cannot."""
    (before, after), rtype, lid = sides, change["type"], change["logicalId"]
    replaced = {c["logicalId"] for c in report.replaced}
    endpoints = [e for e in endpoints_using(after, lid) if e[0] not in replaced]
    blocked = [b for e, _ in endpoints for b in autoscaled_type_changes(before, after, e)]
    if blocked:
        return _blocked(report.name, lid, rtype, blocked)
    if endpoints:
        how = "; ".join(
            f"endpoint `{e}` keeps its name and switches to the new config by {rollout(r)}" for e, r in endpoints
        )
        message = f"rolling replacement of the endpoint config ({because}): {how}"
    else:
        message = f"endpoint config replaced ({because}); no endpoint in this stack keeps using it"
    return [ReviewWarning(report.name, lid, rtype, kind, message, Severity.ROUTINE)]


def _blocked(stack: str, lid: str, rtype: str, reasons: list[str]) -> list[ReviewWarning]:
    return [ReviewWarning(stack, lid, rtype, Kind.AUTOSCALED_TYPE_CHANGE, why, Severity.BLOCKING) for why in reasons]


def _endpoint_update(stack: str, change: dict, before: dict, after: dict) -> list[ReviewWarning]:
    """An endpoint kept by name that points at a new config: updated in place, unless SageMaker refuses it."""
    rtype, lid = change["type"], change["logicalId"]
    if rtype != "AWS::SageMaker::Endpoint" or change["impact"] in REPLACING:
        return []
    if "EndpointConfigName" not in change["properties"]:
        return []
    blocked = autoscaled_type_changes(before, after, lid)
    if blocked:
        return _blocked(stack, lid, rtype, blocked)
    endpoint = after.get("Resources", {}).get(lid, {})
    message = f"same endpoint, new endpoint config: updated in place by {rollout(endpoint)}"
    return [ReviewWarning(stack, lid, rtype, Kind.ENDPOINT_UPDATE, message, Severity.ROUTINE)]


COMPONENT = "AWS::SageMaker::InferenceComponent"


def _hosting_switch(report: StackReport) -> list[ReviewWarning]:
    """A model moving between the endpoint's variant and an inference component (serving.scale_to_zero): the
    endpoint keeps its name, but what serves is replaced, and between the endpoint update and the component's
    first copy (or the other way round, the variant's start) no model answers."""
    configs = [c for c in report.replaced if c["type"] == "AWS::SageMaker::EndpointConfig"]
    if not configs:
        return []
    added = [c["logicalId"] for c in report.added if c["type"] == COMPONENT]
    removed = [c["logicalId"] for c in report.removed if c["type"] == COMPONENT]
    if added:
        how = (
            f"from a model on the variant to inference component `{added[0]}` that scales to zero: the endpoint "
            "moves onto a config without a model before the component's first copy starts"
        )
    elif removed:
        how = (
            f"from inference component `{removed[0]}` back to a model on the variant: the component is deleted and "
            "the variant's instances start with the model"
        )
    else:
        return []
    message = f"hosting switch {how}; clients get errors for the minutes in between: deploy outside use"
    lid = configs[0]["logicalId"]
    return [ReviewWarning(report.name, lid, configs[0]["type"], Kind.HOSTING_SWITCH, message)]


def _removals(reports: list[StackReport]) -> list[ReviewWarning]:
    """Removed sensitive resources, each read against what was added: a rename, a move, or a plain deletion."""
    added_by_type: dict[str, list[tuple[str, str]]] = defaultdict(list)
    for report in reports:
        for change in report.added:
            added_by_type[change["type"]].append((report.name, change["logicalId"]))
    removed = [(r.name, c) for r in reports for c in r.removed if c["type"] in SENSITIVE]
    removed.sort(key=lambda item: (item[0], item[1]["logicalId"]))
    return [_removal(name, change, added_by_type.get(change["type"], [])) for name, change in removed]


def _removal(stack: str, change: dict, added: list[tuple[str, str]]) -> ReviewWarning:
    """A new logical id of the same type is a new, empty resource: in the same stack a rename, elsewhere a move."""
    rtype, lid = change["type"], change["logicalId"]
    klass, stake = SENSITIVE[rtype]
    orphaned = change["impact"] == "WILL_ORPHAN"
    fate = "orphaned: retained by its DeletionPolicy, no longer managed by the stack" if orphaned else "deleted"
    same_stack = sorted(other for where, other in added if where == stack)
    other_stacks = sorted(f"{where}/{other}" for where, other in added if where != stack)
    if same_stack:
        kind = Kind.REPLACED_BY_RENAME
        message = (
            f"{klass}: logical ID `{lid}` removed ({fate}) and {', '.join(f'`{o}`' for o in same_stack)} of the same "
            f"type added: a renamed construct is a replacement, {stake}"
        )
    elif other_stacks:
        kind = Kind.MOVED
        message = (
            f"{klass}: removed here ({fate}) and a {rtype} added in `{', '.join(other_stacks)}`: "
            f"moving between stacks is a replacement, {stake}"
        )
    else:
        kind = Kind.ORPHANED if orphaned else Kind.DELETED
        message = f"{klass}: {fate}; {stake.split(';')[0]}"
    return ReviewWarning(stack, lid, rtype, kind, message, _severity(klass, kind))


def _verb(change: dict) -> str:
    return "added" if change["isAddition"] else "removed" if change["isRemoval"] else "changed"


def _touches_iam(change: dict) -> bool:
    """IAM resources, and resource policies; a key counts only when its policy changes (or it comes or goes)."""
    rtype = change["type"]
    if rtype.startswith(IAM_PREFIXES):
        return True
    return rtype in IAM_POLICY_TYPES and (
        rtype != "AWS::KMS::Key" or "KeyPolicy" in change["properties"] or _verb(change) != "changed"
    )


def _touches_network(change: dict) -> bool:
    rtype, properties = change["type"], change["properties"]
    return rtype in SG_TYPES or "SecurityGroupIds" in properties or "VpcConfig" in properties


def _access_lines(reports: list[StackReport]) -> tuple[list[str], list[str]]:
    """(IAM lines, security-group lines): one per resource that touches them, sorted."""
    iam, security = set(), set()
    for report in reports:
        for change in report.added + report.changed + report.removed:
            line = f"`{report.name}` {change['type']} `{change['logicalId']}` {_verb(change)}"
            if _touches_iam(change):
                iam.add(line)
            if _touches_network(change):
                security.add(line)
    return sorted(iam), sorted(security)


def _deduplicated(warnings: list[ReviewWarning]) -> list[ReviewWarning]:
    """An endpoint and its config can both carry one blocked change: say it once (the later one wins)."""
    unique = list({(w.stack, w.kind, w.message): w for w in warnings}.values())
    return sorted(unique, key=lambda w: (w.stack, w.logical_id, w.kind))


def stack_settings(base: dict[str, StackArtifact], head: dict[str, StackArtifact]) -> list[str]:
    """Stack-level settings the templates do not show: termination protection."""
    lines = []
    for name in sorted(set(base) & set(head)):
        before, after = base[name].termination_protection, head[name].termination_protection
        if before != after:
            lines.append(f"`{name}`: termination protection {'on' if before else 'off'} -> {'on' if after else 'off'}")
    return lines
