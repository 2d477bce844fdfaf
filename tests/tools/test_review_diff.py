"""Review summary on pairs of synthesized apps: exactly which resources are flagged, and the cost delta.

Pairs (one extra in-process synth each; the bases come from the session `assemblies` fixture):
- prod model promotion: only the lock's model (config/prod.model.json) changes -> Model and EndpointConfig replaced, the
  Endpoint keeps its name and rolls onto the new config, nothing stateful touched;
- dev renamed bucket construct: the access-log bucket's logical ID changes (what renaming its
  construct does) -> flagged as a replacement of stateful data;
- prod serving.instance_type changed: the autoscaled variant changes type -> blocking (SageMaker refuses it);
- dev renamed key construct: the Data stack's export of the key ARN disappears while the deployed stacks
  import it -> blocking, and the key itself a blocking stateful replacement.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.synth import ROOT, cli_context, load_served, replaced
from tools import cost, review_diff

pytestmark = pytest.mark.slow


def _synth(config, outdir: Path, rename: tuple[str, str, str] | None = None) -> Path:
    """The real app for `config`; rename=(unit, construct id, new logical id) renames one resource's logical id."""
    from aws_cdk import App

    from stacks.application import build_app

    app = App(outdir=str(outdir), context=cli_context())
    stacks = build_app(app, config)
    if rename:
        unit, construct_id, new_id = rename
        stack = stacks[unit]
        resource = stack.node.find_child(construct_id).node.default_child
        stack.rename_logical_id(stack.resolve(resource.logical_id), new_id)
    app.synth()
    return outdir


def _assert_only_changes_in(result, stack: str) -> None:
    """`stack` changed; every other stack adds, removes and replaces nothing. (Not "unchanged": the
    base comes from the session fixture, and another stack's asset hash may differ if its source
    files were edited between the two synths.)"""
    assert next(s for s in result.stacks if s.name == stack).status == "changed"
    for s in result.stacks:
        if s.name != stack:
            assert (s.added, s.removed, s.replaced) == ([], [], []), s.name
            assert {c["type"] for c in s.changed} <= {
                "AWS::StepFunctions::StateMachine",
                "AWS::IAM::ManagedPolicy",
                "AWS::IAM::Policy",
            }, (s.name, s.changed)


def _only(template: dict, rtype: str) -> str:
    ids = [lid for lid, res in template["Resources"].items() if res["Type"] == rtype]
    assert len(ids) == 1, (rtype, ids)
    return ids[0]


def _against_base(assemblies, env: str, config, outdir: Path, rename: tuple[str, str, str] | None = None):
    """(base, head) read assemblies: the session's synth of `env` (as deployed) and `config` synthesized now."""
    head_dir = _synth(config, outdir, rename)
    return review_diff.read_assembly(Path(assemblies[env].directory)), review_diff.read_assembly(head_dir)


@pytest.fixture(scope="module")
def promotion(assemblies, tmp_path_factory):
    config = load_served("prod")  # the base (assemblies) serves: tests.synth.served
    if config.serving is None:
        pytest.fail("config/prod.yaml has no serving section")
    promoted = load_served(
        "prod",
        model_package_arn="arn:aws:sagemaker:us-east-1:123456789012:model-package/llminf2proddata-models/3",
        model_prefix="models/llama2-7b-qlora-20261201/merged/",
        compiled_prefix="models/llama2-7b-qlora-20261201/neuron/tp8-np4096-bs8-fp16-neuronx-cc-2.15.141.0/c/output/model/",
    )
    base, head = _against_base(assemblies, "prod", promoted, tmp_path_factory.mktemp("promoted"))
    return base, head, review_diff.review(base, head, "promotion")


@pytest.fixture(scope="module")
def rename(assemblies, tmp_path_factory):
    config = load_served("dev")
    base, head = _against_base(
        assemblies,
        "dev",
        config,
        tmp_path_factory.mktemp("renamed"),
        rename=("Data", "AccessLogBucket", "AccessLogsV2"),
    )
    return base, head, review_diff.review(base, head, "rename")


def test_model_promotion_replaces_only_model_and_endpoint_config(promotion):
    base, head, result = promotion
    serving = "llm-inf2-prod-Serving"
    template = head[serving].template
    model = _only(template, "AWS::SageMaker::Model")
    config_id = _only(template, "AWS::SageMaker::EndpointConfig")
    endpoint = _only(template, "AWS::SageMaker::Endpoint")
    assert result.replaced == {serving: sorted([model, config_id])}
    # the Endpoint's template is unchanged (it points at the config by GetAtt): the config's warning
    # says what happens to it
    assert result.flagged == [(serving, config_id, "REPLACED")]
    _assert_only_changes_in(result, serving)

    markdown = review_diff.render(result)
    warning = next(line for line in markdown.splitlines() if f"`{config_id}`" in line and "**REPLACED**" in line)
    assert "rolling replacement of the endpoint config" in warning
    assert f"endpoint `{endpoint}` keeps its name" in warning
    assert "rolling deployment, batches of 50% of capacity, 600 s apart" in warning
    assert "NEW ENDPOINT" not in markdown
    # the model's S3 prefix is in the execution role's policy: the IAM section says so
    assert "### IAM changes" in markdown and "ExecutionPolicy" in markdown
    # a routine roll: not blocking, not under the stateful warning
    assert result.blocking == [] and [w.severity for w in result.warnings] == [review_diff.Severity.ROUTINE]
    assert "Nothing blocking" in markdown and "### 1 routine rollout(s) the stack manages" in markdown
    assert ":no_entry:" not in markdown and ":warning:" not in markdown
    # same instance type and counts: no changed cost row, every total of prod unchanged
    assert result.cost_rows == [] and "No priced item changes." in markdown
    [prod] = [t for t in result.cost_totals if t.env == "prod"]
    assert prod.old == prod.new and not prod.emulated


def test_renamed_bucket_construct_is_flagged_as_replacement_of_stateful_data(rename):
    base, head, result = rename
    data = "llm-inf2-dev-Data"
    old = next(
        lid
        for lid, res in base[data].template["Resources"].items()
        if res["Type"] == "AWS::S3::Bucket" and lid.startswith("AccessLogBucket")
    )
    assert result.flagged == [(data, old, "REPLACED BY RENAME")]
    warning = result.warnings[0]
    assert "`AccessLogsV2`" in warning.message
    assert "orphaned: retained by its DeletionPolicy" in warning.message
    assert "a new, empty bucket; objects do not move" in warning.message
    _assert_only_changes_in(result, data)
    markdown = review_diff.render(result)
    assert f"- **REPLACED BY RENAME** `{data}` `{old}` (AWS::S3::Bucket): stateful:" in markdown
    assert result.blocking == result.flagged  # a stateful replacement needs its data moved by hand
    assert "### :no_entry: 1 blocking: the deploy fails or needs a manual step" in markdown


def test_review_is_deterministic_and_cli_matches(rename, tmp_path):
    base, head, result = rename
    first = review_diff.render(result)
    again = review_diff.render(review_diff.review(base, head, "rename"))
    assert first == again
    base_dir = next(iter(base.values())).template_file.parent
    head_dir = next(iter(head.values())).template_file.parent
    out = tmp_path / "review.md"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "tools.review_diff",
            "--base-dir",
            str(base_dir),
            "--head-dir",
            str(head_dir),
            "--output",
            str(out),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    text = out.read_text()
    assert text == proc.stdout
    assert text.startswith(review_diff.MARKER)
    assert "REPLACED BY RENAME" in text
    assert str(tmp_path) not in text.split("\n", 2)[2]  # no temporary paths beyond the title line


def test_identical_assemblies_report_no_change(assemblies):
    side = review_diff.read_assembly(Path(assemblies["dev"].directory))
    result = review_diff.review(side, side, "same")
    assert result.flagged == [] and result.replaced == {}
    assert "No infrastructure changes" in review_diff.render(result)


@pytest.fixture
def resized_dev(assemblies, tmp_path):
    """Template-level: the dev endpoint moved from ml.inf2.xlarge to ml.inf2.8xlarge; (base, head, head template)."""
    base_dir = Path(assemblies["dev"].directory)
    head_dir = tmp_path / "head"
    shutil.copytree(base_dir, head_dir)
    path = head_dir / "llm-inf2-dev-Serving.template.json"
    template = json.loads(path.read_text())
    config_id = _only(template, "AWS::SageMaker::EndpointConfig")
    variants = template["Resources"][config_id]["Properties"]["ProductionVariants"]
    assert variants[0]["InstanceType"] == "ml.inf2.xlarge"
    variants[0]["InstanceType"] = "ml.inf2.8xlarge"
    path.write_text(json.dumps(template))
    return review_diff.read_assembly(base_dir), review_diff.read_assembly(head_dir), template


def test_cost_delta_of_a_changed_instance_type(resized_dev):
    base, head, template = resized_dev
    serving = "llm-inf2-dev-Serving"
    config_id = _only(template, "AWS::SageMaker::EndpointConfig")
    table = cost.PriceTable.load()
    rows, notes = review_diff.cost_delta(base, head, table)
    by_label = {row[0]: row for row in rows}
    endpoint = _only(template, "AWS::SageMaker::Endpoint")
    # dev scales to zero: no instance at min scale whatever the type; 730 h/month: 2 x 0.99 -> 2 x 2.36 at max
    at_min = by_label[f"endpoint {serving}/{endpoint} at min scale"]
    assert at_min[1:] == ("0 x ml.inf2.xlarge -> 0 x ml.inf2.8xlarge", "$0.00/month", "$0.00/month", "±0")
    at_max = by_label[f"endpoint {serving}/{endpoint} at max scale"]
    assert at_max[1:] == (
        "2 x ml.inf2.xlarge -> 2 x ml.inf2.8xlarge",
        "$1,445.40/month",
        "$3,445.60/month",
        "+$2,000.20/month",
    )
    # every endpoint and job of the default config is priced (no n/a); the tuning job counts all its trials
    assert [row for row in rows if "n/a" in row] == [] and not any(n.startswith("not priced") for n in notes)
    assert list(by_label) == [at_min[0], at_max[0]]  # only the two changed rows (a type is a change)
    assert "11 unchanged item(s) not shown" in notes  # dev prices 6 endpoint and 7 job lines (its partition); 2 change
    assert any("$2.36 per instance-hour while a copy runs" in note for note in notes), notes
    # dev's totals: min 297.84 (the pruning endpoints) either way, max 2,041.08 -> 4,041.28, one run unchanged
    [dev] = review_diff.environment_costs(base, head, table, review_diff.aws_environments())
    assert (dev.env, dev.emulated) == ("dev", False)
    assert dev.old["min"] == dev.new["min"] == 297.84
    assert round(dev.new["max"] - dev.old["max"], 2) == 2000.20 and dev.old["run"] == dev.new["run"]
    # dev's copy count is registered with Application Auto Scaling, not its variant: SageMaker's refusal of an
    # instance type change on an autoscaled variant does not apply
    result = review_diff.review(base, head, "resize")
    assert result.blocking == [] and config_id
    assert "$2,041.08 -> $4,041.28/month (**+$2,000.20/month**)" in review_diff.render(result)


def test_totals_are_per_environment_with_the_emulated_one_apart(resized_dev, tmp_path_factory):
    """local (no deploy: section: never deployed to AWS) is priced as if it were, marked, and left out of the sum."""
    from tests.synth import shipped_assembly

    local = review_diff.read_assembly(Path(shipped_assembly(tmp_path_factory, "local").directory))
    base, head, _ = resized_dev
    result = review_diff.review({**base, **local}, {**head, **local}, "resize")
    emulated = sorted(t.env for t in result.cost_totals if t.emulated)
    assert emulated == ["local"] and "local" not in review_diff.aws_environments()
    lines = review_diff.totals_table(result.cost_totals)
    assert lines[0] == (
        "| Environment | Always-on at min scale | Always-on at max scale | "
        "One execution of every workflow at its bound |"
    )
    dev, total, local_row = lines[2:]
    assert dev.startswith(
        "| `dev` | $297.84 -> $297.84/month (±0) | $2,041.08 -> $4,041.28/month (**+$2,000.20/month**) |"
    )
    assert total == dev.replace("| `dev` |", "| **AWS, all environments** |")  # local is not in the sum
    assert local_row.startswith("| `local` (emulated on one machine: never billed, not in the sum) | $")
    assert "(±0)" in local_row and "**" not in local_row
    assert "\n".join(lines) in review_diff.render(result)


def test_bad_ref_fails_with_one_line(tmp_path):
    with pytest.raises(review_diff.ReviewError, match=r"^git worktree add no-such-ref-xyz: "):
        review_diff.synth_ref("no-such-ref-xyz", tmp_path, ["dev"])


def test_long_reviews_fit_a_pr_comment(promotion):
    _, _, result = promotion
    full = review_diff.render(result, max_chars=0)
    short = review_diff.render(result, max_chars=4000)
    assert len(short) < len(full)
    assert "Left out to stay under 4,000 characters" in short
    assert "**REPLACED**" in short and "### Cost" in short  # the summary itself is never cut


def test_new_endpoint_and_deleted_log_group_are_flagged(assemblies, tmp_path):
    """Template-level edits of dev: a fixed EndpointName (replaces the endpoint) and a dropped log group."""
    base_dir = Path(assemblies["dev"].directory)
    head_dir = tmp_path / "head"
    shutil.copytree(base_dir, head_dir)
    serving = "llm-inf2-dev-Serving"
    edits = {}
    for path in sorted(head_dir.glob("*.template.json")):
        edits[path.name.removesuffix(".template.json")] = (path, json.loads(path.read_text()))
    endpoint = _only(edits[serving][1], "AWS::SageMaker::Endpoint")
    edits[serving][1]["Resources"][endpoint]["Properties"]["EndpointName"] = "llm-inf2-dev"
    training, dropped = next(
        (stack, lid)
        for stack, (_, template) in sorted(edits.items())
        for lid, res in sorted(template["Resources"].items())
        if res["Type"] == "AWS::Logs::LogGroup"
    )
    policy = edits[training][1]["Resources"].pop(dropped).get("DeletionPolicy")
    for path, template in edits.values():
        path.write_text(json.dumps(template))

    result = review_diff.review(review_diff.read_assembly(base_dir), review_diff.read_assembly(head_dir), "edits")
    fate = "ORPHANED" if policy == "Retain" else "DELETED"
    assert result.flagged == sorted([(serving, endpoint, "NEW ENDPOINT"), (training, dropped, fate)])
    markdown = review_diff.render(result)
    assert "clients see a new endpoint" in markdown and "(EndpointName)" in markdown


def test_engine_agrees_with_cdk_diff_template(rename):
    """The pinned engine marks resources exactly as the pinned CLI's `cdk diff --template` does (one CLI call)."""
    base, head, result = rename
    data = "llm-inf2-dev-Data"
    proc = subprocess.run(
        [
            "npx",
            "--no-install",
            "cdk",
            "diff",
            "--app",
            str(head[data].template_file.parent),
            "--template",
            str(base[data].template_file),
            data,
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=180,
        env={**os.environ, "FORCE_COLOR": "0", "NO_COLOR": "1", "CDK_DISABLE_CLI_TELEMETRY": "true"},
    )
    assert proc.returncode == 0, proc.stderr[-2000:]

    def marks(text: str) -> list[str]:
        return sorted(line.strip() for line in text.splitlines() if line.startswith(("[+]", "[-]", "[~]")))

    ours = next(s.text for s in result.stacks if s.name == data)
    cli = marks(proc.stdout + proc.stderr)
    assert cli and cli == marks(ours)
    assert any(line.startswith("[-] AWS::S3::Bucket") and line.endswith("orphan") for line in cli)


def test_an_environment_missing_on_one_side_is_skipped(tmp_path):
    assert review_diff.synth_tree(ROOT, tmp_path, ["zzz"]) == {"zzz": "no config file"}


@pytest.fixture(scope="module")
def resize(assemblies, tmp_path_factory):
    config = load_served("prod")  # the assemblies fixture serves each env at its recorded prefix
    if config.serving is None or config.serving.autoscaling is None:
        pytest.fail("config/prod.yaml has no autoscaled serving section")
    resized = replaced(config, serving=dataclasses.replace(config.serving, instance_type="ml.inf2.48xlarge"))
    return _against_base(assemblies, "prod", resized, tmp_path_factory.mktemp("resized"))


def test_instance_type_change_on_an_autoscaled_variant_is_blocking(resize):
    base, head = resize
    result = review_diff.review(base, head, "resize")
    serving = "llm-inf2-prod-Serving"
    template = head[serving].template
    config_id, endpoint = _only(template, "AWS::SageMaker::EndpointConfig"), _only(template, "AWS::SageMaker::Endpoint")
    target = _only(template, "AWS::ApplicationAutoScaling::ScalableTarget")
    assert result.blocking == [(serving, config_id, "INSTANCE TYPE ON AUTOSCALED VARIANT")]
    [warning] = [w for w in result.warnings if w.severity == review_diff.Severity.BLOCKING]
    assert warning.message.startswith(
        f"endpoint `{endpoint}` variant AllTraffic: instance type ml.inf2.24xlarge -> ml.inf2.48xlarge while "
        f"scalable target `{target}` is registered: SageMaker refuses that UpdateEndpoint"
    )
    assert "deregister-scalable-target" in warning.message
    markdown = review_diff.render(result)
    assert "### :no_entry: 1 blocking" in markdown and "keeps its name and switches" not in markdown
    # 2 -> 2 and 6 -> 6 instances at 7.79 -> 15.58 USD/h, 730 h: +11,373.40 and +34,120.20 a month
    assert "**+$11,373.40/month**" in markdown and "**+$34,120.20/month**" in markdown


def test_the_same_instance_type_change_without_autoscaling_is_routine(resize, tmp_path):
    """The check reads the deployed (base) scalable target: take it away and the roll is routine again."""
    base, head = resize
    serving = "llm-inf2-prod-Serving"
    template = base[serving].template
    template["Resources"] = {
        lid: res
        for lid, res in template["Resources"].items()
        if not res["Type"].startswith("AWS::ApplicationAutoScaling::")
    }
    path = tmp_path / f"{serving}.template.json"
    path.write_text(json.dumps(template))
    unscaled = dataclasses.replace(base[serving], template_file=path)
    result = review_diff.review({**base, serving: unscaled}, head, "resize")
    assert result.blocking == []
    assert any("keeps its name and switches to the new config" in w.message for w in result.warnings)


@pytest.fixture(scope="module")
def key_rename(assemblies, tmp_path_factory):
    config = load_served("dev")
    return _against_base(
        assemblies, "dev", config, tmp_path_factory.mktemp("key"), rename=("Data", "ArtifactKey", "ArtifactKeyV2")
    )


def test_removed_export_still_imported_and_the_replaced_key_are_blocking(key_rename):
    base, head = key_rename
    result = review_diff.review(base, head, "key rename")
    data = "llm-inf2-dev-Data"
    old_key = _only(base[data].template, "AWS::KMS::Key")
    [(output_id, output)] = [
        (oid, out) for oid, out in base[data].template["Outputs"].items() if old_key in oid and "Export" in out
    ]
    export = output["Export"]["Name"]
    importers = sorted(name for name, art in base.items() if export in json.dumps(art.template) and name != data)
    assert importers  # the deployed stacks import the key ARN
    assert all(export not in json.dumps(art.template) for art in head.values())  # gone from every new template
    assert result.blocking == sorted([(data, old_key, "REPLACED BY RENAME"), (data, output_id, "EXPORT IN USE")])
    in_use = next(w for w in result.warnings if w.kind == "EXPORT IN USE")
    assert in_use.message.startswith(
        f"export `{export}` is removed while deployed stack(s) "
        + ", ".join(f"`{name}`" for name in importers)
        + " import it"
    )
    # the endpoint configs re-encrypting under the new key are routine rollouts, listed apart from the key
    routine = [w for w in result.warnings if w.severity == review_diff.Severity.ROUTINE]
    assert routine and {w.type for w in routine} == {"AWS::SageMaker::EndpointConfig"}
    markdown = review_diff.render(result)
    blocking_section = markdown.split("### :no_entry:", 1)[1].split("###", 1)[0]
    assert "AWS::KMS::Key" in blocking_section and "EndpointConfig" not in blocking_section


def test_an_export_nobody_imports_may_go(key_rename):
    base, head = key_rename
    data = "llm-inf2-dev-Data"
    alone = {data: base[data]}  # no deployed importer
    assert review_diff.exports_in_use(alone, {data: head[data]}) == []


def test_a_failed_review_leaves_no_report_behind(tmp_path):
    out = tmp_path / "review.md"
    out.write_text("<!-- review-diff -->\nthe review of an earlier run\n")
    proc = subprocess.run(
        [sys.executable, "-m", "tools.review_diff", "--base", "no-such-ref-xyz", "--env", "dev", "--output", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 2 and proc.stderr.startswith("review error: git worktree add no-such-ref-xyz: ")
    assert not out.exists() and list(tmp_path.iterdir()) == []
