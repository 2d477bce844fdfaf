"""The deploy: section and the chain of every config/*.yaml: a bad chain fails with one line naming file and field."""

from __future__ import annotations

import shutil
import subprocess
import sys

import pytest
import yaml

from stacks.config import ConfigError, load_config
from stacks.config.deploy import MAX_WAVES
from stacks.config.loader import deployed_environments, load_chain
from tests.synth import ROOT, with_catalog


@pytest.fixture
def config_dir(tmp_path):
    folder = tmp_path / "config"
    shutil.copytree(ROOT / "config", folder)
    return folder


def _set_deploy(folder, env: str, deploy) -> None:
    path = folder / f"{env}.yaml"
    data = yaml.safe_load(path.read_text())
    data["deploy"] = deploy
    path.write_text(yaml.safe_dump(data))


def _add(folder, env: str, deploy) -> None:
    shutil.copy(folder / "staging.yaml", folder / f"{env}.yaml")
    _set_deploy(folder, env, deploy)


def test_the_emulator_is_never_deployed_and_the_others_are_in_chain_order():
    assert deployed_environments(ROOT / "config") == ["dev", "staging", "prod"]
    assert load_config("local", ROOT / "config").deploy is None
    prod = load_config("prod", ROOT / "config").deploy
    assert (prod.after, prod.approval, prod.require_pinned) == ("staging", True, True)


def test_the_chain_reads_the_config_folder_of_the_working_directory(monkeypatch):
    """cdk and deploy.yml run from the repository root, where config/ is."""
    monkeypatch.chdir(ROOT)
    assert deployed_environments() == ["dev", "staging", "prod"]
    assert [[s.name for s in wave] for wave in load_chain()] == [["dev"], ["staging"], ["prod"]]


def test_environments_after_the_same_one_share_a_wave(config_dir):
    _add(config_dir, "qa", {"after": "dev"})
    _add(config_dir, "perf", {"after": "qa"})
    waves = [[stage.name for stage in wave] for wave in load_chain(config_dir)]
    assert waves == [["dev"], ["qa", "staging"], ["perf", "prod"]]


def test_each_stage_gives_deploy_yml_its_name_variable_suffix_and_approval():
    """deploy.yml's matrix reads `name` and `suffix` (AWS_REGION_<SUFFIX>, ...) and `approval` off each entry."""
    entries = [[stage.matrix_entry() for stage in wave] for wave in load_chain(ROOT / "config")]
    assert entries == [
        [{"name": "dev", "suffix": "DEV", "approval": False}],
        [{"name": "staging", "suffix": "STAGING", "approval": False}],
        [{"name": "prod", "suffix": "PROD", "approval": True}],
    ]


def test_a_stage_cannot_be_changed_once_the_chain_is_checked():
    import dataclasses

    stage = load_chain(ROOT / "config")[0][0]
    with pytest.raises(dataclasses.FrozenInstanceError):
        stage.wave = 9


def test_no_deploy_section_anywhere_is_an_empty_chain(config_dir):
    for env in ("dev", "staging", "prod"):
        _set_deploy(config_dir, env, None)
    assert load_chain(config_dir) == []
    assert deployed_environments(config_dir) == []


CASES = [
    (
        "after-unknown",
        lambda d: _set_deploy(d, "staging", {"after": "dve"}),
        "staging.yaml: deploy.after: got 'dve': no such file; environments deployed: dev, prod, staging",
    ),
    (
        "after-the-emulator",
        lambda d: _set_deploy(d, "staging", {"after": "local"}),
        "staging.yaml: deploy.after: got 'local': <dir>/local.yaml has no deploy: section",
    ),
    (
        "cycle",
        lambda d: _set_deploy(d, "dev", {"after": "prod"}),
        "deploy.after: dev -> prod -> staging -> dev is a cycle; the first environment has after: null",
    ),
    (
        "itself",
        lambda d: _set_deploy(d, "dev", {"after": "dev"}),
        "dev.yaml: deploy.after: dev -> dev is a cycle",
    ),
    (
        "too-deep",
        lambda d: [_add(d, "dr", {"after": "prod"}), _add(d, "drx", {"after": "dr"})],
        f"drx.yaml: deploy.after: got 'dr': wave {MAX_WAVES + 1}, deploy.yml runs {MAX_WAVES}; deploy drx after an "
        "environment of an earlier wave, or add a wave job to .github/workflows/deploy.yml and raise MAX_WAVES "
        "(stacks/config/deploy.py)",
    ),
    (
        "unknown-key",
        lambda d: _set_deploy(d, "dev", {"afterr": None}),
        "dev.yaml: deploy.afterr: unknown setting; did you mean 'after'? allowed: after, approval, require_pinned",
    ),
    (
        "bad-name",
        lambda d: _set_deploy(d, "dev", {"after": "Staging"}),
        "dev.yaml: deploy.after: got 'Staging'; must match [a-z][a-z0-9]{0,15}",
    ),
    (
        "approval-not-bool",
        lambda d: _set_deploy(d, "prod", {"after": "staging", "approval": "yes"}),
        "prod.yaml: deploy.approval: got 'yes'; expected true or false",
    ),
]


@pytest.mark.parametrize(("case", "change", "expected"), CASES, ids=[c[0] for c in CASES])
def test_a_bad_chain_fails_with_one_line(config_dir, case, change, expected):
    change(config_dir)
    with pytest.raises(ConfigError) as err:
        load_chain(config_dir)
    message = str(err.value)
    assert "\n" not in message
    assert expected.replace("<dir>", config_dir.as_posix()) in message, message


def test_the_chain_tool_prints_a_bad_chain_as_one_line(config_dir):
    _set_deploy(config_dir, "dev", {"after": "prod"})
    proc = subprocess.run(
        [sys.executable, "tools/deploy_chain.py", "--config-dir", str(config_dir)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert (proc.returncode, proc.stdout) == (2, "")
    assert proc.stderr.count("\n") == 1 and proc.stderr.startswith("deploy chain: ") and "is a cycle" in proc.stderr


def test_the_deploy_section_changes_no_template(shipped_assemblies, tmp_path):
    """deploy.yml reads it; the stacks never do: prod with and without the section synthesizes the same."""
    from tests.synth import synth

    data = yaml.safe_load((ROOT / "config" / "prod.yaml").read_text())
    assert data.pop("deploy")
    (tmp_path / "config").mkdir()
    (tmp_path / "config" / "prod.yaml").write_text(yaml.safe_dump(data))
    with_catalog(tmp_path / "config")
    bare = load_config("prod", tmp_path / "config")
    assert bare.deploy is None
    shipped = shipped_assemblies["prod"]
    without = synth(bare, tmp_path / "without")
    assert {s.stack_name: s.template for s in shipped.stacks} == {s.stack_name: s.template for s in without.stacks}


def test_two_environments_may_rehearse_each_other(config_dir):
    """The other environment is compared as its profile alone: its own rehearsal is not checked again from here."""
    staging = yaml.safe_load((config_dir / "staging.yaml").read_text())
    prod_path = config_dir / "prod.yaml"
    prod = yaml.safe_load(prod_path.read_text())
    prod["rehearses"] = {**staging["rehearses"], "environment": "staging"}
    prod_path.write_text(yaml.safe_dump(prod))
    assert load_config("staging", config_dir).rehearses.environment == "prod"
    assert load_config("prod", config_dir).rehearses.environment == "staging"
