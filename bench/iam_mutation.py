"""IAM mutation run: each grant of the synthesized roles that the local run uses, removed one at a time, must make
the local pipeline fail AccessDenied naming the action and the resource.

    make iam-mutation                                    # synth local, then this (writes the two files below)
    python bench/iam_mutation.py --cdk-out cdk.out [--workflows training pruning] [--limit N]

1. One probe run per workflow (`local.pipeline --iam-probe`: IAM enforced, stop at the first denial, end after the
   workflow's execution) records every call the roles made and the template statement that allowed it
   (local/iam_record.py): the grants the run uses. A grant is one Action entry of a statement on one of its
   Resource entries; every other Allow entry of the templates' role policies is listed as unused, not run.
2. For each used grant: a copy of the cloud assembly whose template lacks it (the statement split so that every
   other action and resource it granted stays), deployed and run with the workflow that used it. The result is
   `denied` (the pipeline's AccessDenied line: action and resource), `survived` (the run ended without a denial:
   another statement grants the same), or `failed` (it ended otherwise: its last line).

Writes bench/iam_mutation.json and bench/iam_mutation.md (the table).
"""

from __future__ import annotations

import argparse
import copy
import json
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
POLICY_TYPES = ("AWS::IAM::ManagedPolicy", "AWS::IAM::Policy")
DENIAL = re.compile(r"pipeline: AccessDenied: .*")


def as_list(value: Any) -> list:
    return list(value) if isinstance(value, list) else [value]


def documents(template: dict) -> list[tuple[str, str | None, dict]]:
    """(logical id, inline policy name or None, policy document) of every role policy in a template."""
    found = []
    for logical_id, resource in template.get("Resources", {}).items():
        properties = resource.get("Properties", {})
        if resource["Type"] in POLICY_TYPES:
            found.append((logical_id, None, properties["PolicyDocument"]))
        elif resource["Type"] == "AWS::IAM::Role":
            found += [(logical_id, p["PolicyName"], p["PolicyDocument"]) for p in properties.get("Policies", [])]
    return found


def all_grants(cdk_out: Path) -> list[dict]:
    """Every (statement, Action entry, Resource entry) an Allow statement of the templates grants."""
    grants = []
    for path in sorted(cdk_out.glob("*.template.json")):
        template = json.loads(path.read_text())
        for logical_id, inline, document in documents(template):
            for index, statement in enumerate(as_list(document["Statement"])):
                if statement.get("Effect") != "Allow":
                    continue
                for action in as_list(statement.get("Action", [])):
                    for entry in range(len(as_list(statement.get("Resource", "*")))):
                        grants.append(
                            {
                                "template": path.name,
                                "stack": path.name.removesuffix(".template.json"),
                                "logical_id": logical_id,
                                "inline_policy": inline,
                                "statement": index,
                                "sid": statement.get("Sid"),
                                "granted": action,
                                "resource_entry": entry,
                            }
                        )
    return grants


def grant_key(grant: dict) -> tuple:
    return (
        grant.get("stack"),
        grant.get("logical_id"),
        grant.get("inline_policy"),
        grant["statement"],
        grant["granted"],
        grant.get("resource_entry") or 0,
    )


def without(template: dict, grant: dict) -> dict:
    """`template` with one Action entry removed from one Resource entry of one statement (the rest kept)."""
    mutated = copy.deepcopy(template)
    document = next(
        d
        for lid, inline, d in documents(mutated)
        if lid == grant["logical_id"] and inline == grant.get("inline_policy")
    )
    statements = as_list(document["Statement"])
    statement = statements[grant["statement"]]
    actions, resources = as_list(statement["Action"]), as_list(statement.get("Resource", "*"))
    kept = []
    others = [a for a in actions if a != grant["granted"]]
    if others:
        kept.append({**statement, "Action": others})
    rest = [r for i, r in enumerate(resources) if i != grant["resource_entry"]]
    if rest:
        narrowed = {k: v for k, v in statement.items() if k != "Sid"}
        kept.append({**narrowed, "Action": grant["granted"], "Resource": rest})
    document["Statement"] = statements[: grant["statement"]] + kept + statements[grant["statement"] + 1 :]
    if not document["Statement"]:  # IAM refuses a policy without statements: the policy goes, as it would in CDK
        drop_policy(mutated, grant["logical_id"], grant.get("inline_policy"))
    return mutated


def drop_policy(template: dict, logical_id: str, inline: str | None) -> None:
    """Remove a policy resource (and every DependsOn on it), or a role's inline policy."""
    resources = template["Resources"]
    if inline is not None:
        properties = resources[logical_id]["Properties"]
        properties["Policies"] = [p for p in properties["Policies"] if p["PolicyName"] != inline]
        return
    del resources[logical_id]
    for resource in resources.values():
        depends = as_list(resource.get("DependsOn", []))
        if logical_id in depends:
            resource["DependsOn"] = [d for d in depends if d != logical_id]


def assembly_with(cdk_out: Path, folder: Path, template_name: str, template: dict) -> Path:
    """A cloud assembly in `folder`: links to `cdk_out`'s files, one template replaced."""
    folder.mkdir(parents=True, exist_ok=True)
    for entry in cdk_out.iterdir():
        if entry.name != template_name:
            (folder / entry.name).symlink_to(entry.resolve())
    (folder / template_name).write_text(json.dumps(template, indent=1))
    return folder


def probe(cdk_out: Path, workflow: str, workdir: Path) -> dict[str, Any]:
    """One `local.pipeline --iam-probe` run: exit code, its denial line (if any), seconds, the IAM record."""
    started = time.monotonic()
    command = [sys.executable, "-m", "local.pipeline", "--cdk-out", str(cdk_out), "--workflow", workflow]
    command += ["--iam-probe", "--workdir", str(workdir)]
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, check=False)
    output = done.stdout + done.stderr
    denial = DENIAL.search(output)
    record_path = workdir / workflow / "iam_calls.json"
    lines = [line for line in output.splitlines() if line.strip()]
    return {
        "code": done.returncode,
        "denial": denial.group(0) if denial else None,
        "last_line": lines[-1] if lines else "",
        "seconds": round(time.monotonic() - started, 1),
        "record": json.loads(record_path.read_text()) if record_path.exists() else {},
    }


def mutate_one(cdk_out: Path, grant: dict, work: Path) -> dict:
    template_name = grant["template"]
    mutated = without(json.loads((cdk_out / template_name).read_text()), grant)
    with tempfile.TemporaryDirectory(dir=work) as folder:
        assembly = assembly_with(cdk_out, Path(folder) / "cdk.out", template_name, mutated)
        ran = probe(assembly, grant["workflow"], Path(folder) / "run")
    if ran["denial"]:
        result = "denied"
    elif ran["code"] == 0:
        result = "survived"
    else:
        result = "failed"
    said = ran["denial"] or ran["last_line"]
    return {"result": result, "said": said, "seconds": ran["seconds"], "denials": ran["record"].get("denials", [])}


def used_grants(records: dict[str, dict]) -> dict[tuple, dict]:
    """Grant key -> the first call it allowed (with the workflow that made it)."""
    used: dict[tuple, dict] = {}
    for workflow, record in records.items():
        for call in record.get("calls", []):
            used.setdefault(grant_key(call), {**call, "workflow": workflow})
    return used


def table(report: dict) -> str:
    rows = [
        "| # | policy (stack / logical id, Sid) | grant removed | resource called | workflow | result "
        "| what the local run said | s |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for number, m in enumerate(report["mutations"], 1):
        said = m["said"].replace("pipeline: AccessDenied: ", "").replace("|", "\\|")
        rows.append(
            f"| {number} | {m['stack']} / {m['logical_id']} ({m['sid'] or 'statement ' + str(m['statement'])}) | "
            f"`{m['granted']}` (Resource entry {m['resource_entry']}) | `{m['resource']}` | {m['workflow']} | "
            f"{m['result']} | {said} | {m['seconds']} |"
        )
    for m in report.get("not_run", []):
        rows.append(
            f"| - | {m['stack']} / {m['logical_id']} ({m['sid'] or 'statement ' + str(m['statement'])}) | "
            f"`{m['granted']}` (Resource entry {m['resource_entry']}) | `{m['resource']}` | {m['workflow']} | "
            "not run (time budget) | | |"
        )
    ran = [w.lower() for w in report["baselines"]]
    unused = [g for g in report["unused"] if g["stack"].rsplit("-", 1)[-1].lower() in ran]
    elsewhere = sorted({g["stack"] for g in report["unused"]} - {g["stack"] for g in unused})
    rows += ["", f"Grants of the {', '.join(ran)} stacks that the run did not use (not run): {len(unused)}", ""]
    rows += [
        f"- {g['stack']} / {g['logical_id']} ({g['sid'] or 'statement ' + str(g['statement'])}): `{g['granted']}`"
        f" (Resource entry {g['resource_entry']})"
        for g in unused
    ]
    rows += ["", f"Stacks whose workflow this run did not run: {', '.join(elsewhere) or 'none'}"]
    return "\n".join(rows) + "\n"


def arguments(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cdk-out", type=Path, default=ROOT / "cdk.out")
    parser.add_argument("--workflows", nargs="+", default=["training", "pruning"])
    parser.add_argument("--output", type=Path, default=ROOT / "bench" / "iam_mutation.json")
    parser.add_argument("--table", type=Path, default=ROOT / "bench" / "iam_mutation.md")
    parser.add_argument("--limit", type=int, help="run only the first N mutations (a quick look)")
    parser.add_argument(
        "--budget-s", type=float, help="start no mutation after this many seconds; the rest are listed as not run"
    )
    parser.add_argument(
        "--merge", action="store_true", help="keep --output's results of the workflows not run now (one table)"
    )
    parser.add_argument("--table-only", action="store_true", help="rewrite --table from --output's report")
    return parser.parse_args(argv)


def baseline(cdk_out: Path, workflows: list[str], work: Path) -> tuple[dict, dict]:
    """(workflow -> IAM record, workflow -> {seconds, calls}) of the unmutated probe runs."""
    records, baselines = {}, {}
    for workflow in workflows:
        ran = probe(cdk_out, workflow, work / "baseline")
        print(f"baseline {workflow}: exit {ran['code']} in {ran['seconds']} s, {ran['denial'] or 'no denial'}")
        if ran["code"] != 0:
            raise SystemExit(f"iam-mutation: the unmutated {workflow} run failed: {ran['denial'] or ran['last_line']}")
        records[workflow] = ran["record"]
        baselines[workflow] = {"seconds": ran["seconds"], "calls": len(ran["record"].get("calls", []))}
    return records, baselines


def main(argv: list[str] | None = None) -> int:
    args = arguments(argv)
    if args.table_only:
        args.table.write_text(table(json.loads(args.output.read_text())))
        return 0
    cdk_out = args.cdk_out.resolve()
    work = ROOT / "build" / "iam-mutation"
    work.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    records, baselines = baseline(cdk_out, args.workflows, work)
    used = used_grants(records)
    grants = {grant_key(g): g for g in all_grants(cdk_out)}
    mutations, not_run = [], []
    for key, call in list(used.items())[: args.limit]:
        grant = {**grants[key], "workflow": call["workflow"], "resource": call["resource"], "action": call["action"]}
        if args.budget_s and time.monotonic() - started > args.budget_s:
            not_run.append(grant)
            continue
        grant.update(mutate_one(cdk_out, grant, work))
        print(f"{grant['stack']}/{grant['logical_id']}[{grant['statement']}] -{grant['granted']}: {grant['result']}")
        mutations.append(grant)
    report = {"baselines": baselines, "mutations": mutations, "not_run": not_run, "used": [list(k) for k in used]}
    if args.merge and args.output.exists():
        report = merged(json.loads(args.output.read_text()), report, args.workflows)
    used_keys = {tuple(k) for k in report["used"]}
    report["unused"] = [g for k, g in grants.items() if k not in used_keys]
    report["seconds"] = round(time.monotonic() - started, 1)
    args.output.write_text(json.dumps(report, indent=2) + "\n")
    args.table.write_text(table(report))
    print(f"iam-mutation: {len(mutations)} grant(s) removed one at a time in {report['seconds']} s -> {args.output}")
    return 0 if all(m["result"] == "denied" for m in mutations) else 1


def merged(previous: dict, current: dict, workflows: list[str]) -> dict:
    """`current` with `previous`'s baselines, mutations and used grants of the other workflows."""
    kept = [m for m in previous.get("mutations", []) if m["workflow"] not in workflows]
    skipped = [m for m in previous.get("not_run", []) if m["workflow"] not in workflows]
    others = {w: b for w, b in previous.get("baselines", {}).items() if w not in workflows}
    previous_used = previous.get("used") or [list(grant_key(m)) for m in kept]
    return {
        "baselines": {**others, **current["baselines"]},
        "mutations": kept + current["mutations"],
        "not_run": skipped + current["not_run"],
        "used": [u for u in previous_used if u not in current["used"]] + current["used"],
    }


if __name__ == "__main__":
    sys.exit(main())
