"""make profile: the cheapest profile the synth accepts for a recorded model, its refusals in one line each."""

from __future__ import annotations

import contextlib
import io
import shutil
from pathlib import Path

import pytest
import yaml

from stacks.config import ConfigError, load_config
from stacks.config.model_catalog import BaseModel, read_catalog
from stacks.config.profile_search import Derived, NoProfile, Target, derive
from stacks.serving.backends import backend, names
from tests.synth import ROOT, with_catalog
from tools.cost.prices import PriceTable
from tools.profile.cli import TEMPLATES, main, price_book, read_target

TABLE = PriceTable.load()
PRICES = price_book(TABLE)
SHIPPED_ENVS = ("dev", "staging", "prod")


def run_tool(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(list(argv))
    return code, out.getvalue(), err.getvalue()


def config_copy(folder: Path) -> Path:
    """A copy of config/'s environments and model catalog (no served versions: a first deploy)."""
    folder.mkdir(parents=True, exist_ok=True)
    for path in (ROOT / "config").glob("*.yaml"):
        shutil.copyfile(path, folder / path.name)
    return with_catalog(folder)


def written(config_dir: Path, env: str, derived: Derived) -> None:
    """config_dir/<env>.yaml as the profile makes it (the YAML value the search checked)."""
    from stacks.config.profile import applied

    raw = yaml.safe_load((config_dir / f"{env}.yaml").read_text())
    (config_dir / f"{env}.yaml").write_text(yaml.safe_dump(applied(raw, derived.changes), sort_keys=False))


def one_line_reason(line: str, base: BaseModel, backend_name: str) -> bool:
    """A refusal names the architecture the backend does not load, else a size or head fact of the model."""
    if "\n" in line.strip():
        return False
    record = base.record
    if record.model_type not in backend(backend_name).architectures:
        return f"model_type {record.model_type}" in line and "loads" in line
    return any(fact in line for fact in ("parameters", "GiB", " GB ", "attention heads", "key/value heads"))


@pytest.mark.parametrize("env", SHIPPED_ENVS)
def test_a_shipped_environments_model_gets_a_profile_that_synthesizes(tmp_path, env):
    """What each environment trains, on its backend: the profile, written into the environment, loads with the
    synth's loader and serves on the profile's instance type."""
    shipped = load_config(env, ROOT / "config")
    folder = config_copy(tmp_path / "config")
    derived = derive(read_target(folder, env), shipped.base_model, shipped.serving.backend, PRICES)
    written(folder, env, derived)
    loaded = load_config(env, folder, served=False)
    assert loaded.serving.instance_type == derived.profile.instance_type
    assert loaded.base_model.record == shipped.base_model.record


def test_stagings_model_costs_no_more_than_the_shipped_staging_profile(tmp_path):
    staging = load_config("staging", ROOT / "config")
    derived = derive(read_target(ROOT / "config", "staging"), staging.base_model, "vllm_neuronx", PRICES)
    assert PRICES.serving[derived.profile.instance_type] <= PRICES.serving[staging.serving.instance_type]
    compile_type = staging.training.neuron_compile.instance_type
    assert PRICES.training[derived.profile.compile_instance_type] <= PRICES.training[compile_type]


def _records(config_dir: Path) -> list[BaseModel]:
    return list(read_catalog(config_dir).values())


@pytest.mark.parametrize("backend_name", names())
def test_every_record_on_every_backend_synthesizes_or_says_why_in_one_line(tmp_path, backend_name):
    """For each record of the catalog (whatever it holds): the profile loads with the synth's loader in the
    backend's template environment, or the refusal is one line naming the architecture or a size fact."""
    folder = config_copy(tmp_path / "config")
    env = TEMPLATES[backend_name]
    pristine = (folder / f"{env}.yaml").read_text()
    for base in _records(folder):
        (folder / f"{env}.yaml").write_text(pristine)
        try:
            derived = derive(read_target(folder, env), base, backend_name, PRICES)
        except NoProfile as refusal:
            assert one_line_reason(str(refusal), base, backend_name), (base.name, str(refusal))
            continue
        written(folder, env, derived)
        loaded = load_config(env, folder, served=False)
        assert (loaded.base_model.name, loaded.serving.backend) == (base.name, backend_name)


def test_a_model_without_a_record_is_refused_naming_the_catalog_and_the_command():
    code, out, err = run_tool("--model", "org/unrecorded-7b", "--backend", "vllm_neuronx")
    assert (code, out) == (2, "")
    assert err == (
        "make profile: no record of org/unrecorded-7b in config/models/, so nothing says what it is: run "
        "`make base-model MODEL=org/unrecorded-7b` and commit the record it writes\n"
    )


def test_an_architecture_the_backend_does_not_load_gets_the_synths_own_line(tmp_path):
    """Qwen2.5 on LMI NeuronX: the line is the one the synth prints for dev training it (on a compile host with
    the memory, so that the architecture is the only thing wrong)."""
    folder = config_copy(tmp_path / "config")
    dev = yaml.safe_load((folder / "dev.yaml").read_text())
    dev["training"]["hyperparameters"]["model_id"] = "Qwen/Qwen2.5-7B-Instruct"
    dev["training"]["neuron_compile"]["instance_type"] = "ml.trn1.32xlarge"
    (folder / "dev.yaml").write_text(yaml.safe_dump(dev, sort_keys=False))
    with pytest.raises(ConfigError) as synth:
        load_config("dev", folder)
    code, out, err = run_tool("--model", "Qwen/Qwen2.5-7B-Instruct", "--backend", "lmi_neuronx")
    assert (code, out) == (2, "")
    assert err == f"make profile: {str(synth.value).replace(folder.as_posix() + '/', 'config/')}\n"
    assert "model_type qwen2 (Qwen2ForCausalLM)" in err and "serve it with backend vllm_neuronx" in err


def test_the_printed_profile_names_its_price_and_training_type():
    code, out, err = run_tool("--model", "tinyllama-1.1b-chat-v1.0", "--backend", "lmi_neuronx")
    assert (code, err) == (0, "")
    hourly = PRICES.serving["ml.inf2.xlarge"]
    assert "serving.instance_type: ml.inf2.xlarge" in out
    assert f"${hourly:g}/h, ${hourly * TABLE.hours_per_month:,.2f}/month" in out
    assert "QLoRA training: ml.g5." in out


def test_without_env_nothing_is_written(tmp_path):
    folder = config_copy(tmp_path / "config")
    before = {p.name: p.read_bytes() for p in folder.glob("*.yaml")}
    code, _, _ = run_tool("--config-dir", str(folder), "--model", "qwen2.5-7b-instruct", "--backend", "vllm_neuronx")
    assert code == 0
    assert {p.name: p.read_bytes() for p in folder.glob("*.yaml")} == before


def test_a_target_environment_is_checked_in_its_own_file():
    target = read_target(ROOT / "config", "prod")
    assert isinstance(target, Target) and target.source == "config/prod.yaml"
