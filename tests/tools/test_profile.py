"""make profile: the cheapest profile the synth accepts for a recorded model, its refusals in one line each."""

from __future__ import annotations

import contextlib
import io
import shutil
from pathlib import Path

import pytest
import yaml

from stacks.config import ConfigError, load_config
from stacks.config.profile_search import Target, derive
from tests.synth import ROOT, with_catalog
from tools.cost.prices import PriceTable
from tools.profile.cli import main, price_book, read_target

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


def leaves(value, path: str = "") -> dict[str, object]:
    """Every scalar of a YAML value by dotted path."""
    if isinstance(value, dict):
        return {k: v for key, item in value.items() for k, v in leaves(item, f"{path}.{key}" if path else key).items()}
    return {path: value}


def write_with_tool(folder: Path, model: str, backend_name: str, env: str) -> tuple[int, str, str]:
    return run_tool("--config-dir", str(folder), "--model", model, "--backend", backend_name, "--env", env)


@pytest.mark.parametrize("env", SHIPPED_ENVS)
def test_a_shipped_environments_model_gets_a_profile_that_synthesizes(tmp_path, env):
    """What each environment trains, on its backend, written into the environment (ENV=): the file loads with the
    synth's loader, rehearsal included, and serves on the printed instance type."""
    shipped = load_config(env, ROOT / "config")
    folder = config_copy(tmp_path / "config")
    code, out, err = write_with_tool(folder, shipped.base_model.name, shipped.serving.backend, env)
    assert (code, err) == (0, ""), err
    loaded = load_config(env, folder)
    assert f"serving.instance_type: {loaded.serving.instance_type} " in out
    assert loaded.base_model.record == shipped.base_model.record


def test_stagings_model_costs_no_more_than_the_shipped_staging_profile():
    staging = load_config("staging", ROOT / "config")
    derived = derive(read_target(ROOT / "config", "staging"), staging.base_model, "vllm_neuronx", PRICES)
    assert PRICES.serving[derived.profile.instance_type] <= PRICES.serving[staging.serving.instance_type]
    compile_type = staging.training.neuron_compile.instance_type
    assert PRICES.training[derived.profile.compile_instance_type] <= PRICES.training[compile_type]


def test_env_changes_only_the_lines_whose_values_change(tmp_path):
    """dev trained on Llama-2-7B (same backend): each changed line is one changed value; every other line, comments
    included, stays as it was, and the file loads."""
    folder = config_copy(tmp_path / "config")
    before = (folder / "dev.yaml").read_text()
    code, _, err = write_with_tool(folder, "llama-2-7b-chat-hf", "lmi_neuronx", "dev")
    assert code == 0, err
    after = (folder / "dev.yaml").read_text()
    old, new = before.splitlines(), after.splitlines()
    assert len(old) == len(new)
    changed = [line for line, was in zip(new, old, strict=True) if line != was]
    differing = {k for k, v in leaves(yaml.safe_load(after)).items() if leaves(yaml.safe_load(before)).get(k) != v}
    assert len(changed) == len(differing) > 0
    assert {path.rsplit(".", 1)[-1] for path in differing} == {line.split(":")[0].strip() for line in changed}
    assert load_config("dev", folder).base_model.name == "llama-2-7b-chat-hf"


def test_changing_the_backend_removes_the_other_backends_settings(tmp_path):
    """dev moved to vLLM Neuron for Qwen2.5: serving.lmi and the LMI image go, serving.neuron comes; every comment
    line outside the removed section stays."""
    folder = config_copy(tmp_path / "config")
    before = (folder / "dev.yaml").read_text()
    code, out, err = write_with_tool(folder, "Qwen/Qwen2.5-7B-Instruct", "vllm_neuronx", "dev")
    assert code == 0, err
    after = (folder / "dev.yaml").read_text()
    serving = yaml.safe_load(after)["serving"]
    assert (
        "lmi" not in serving
        and "image" not in serving
        and set(serving["neuron"])
        == {
            "tensor_parallel_size",
            "batch_size",
            "sequence_length",
        }
    )
    comments = [line for line in before.splitlines() if line.lstrip().startswith("#")]
    assert all(line in after.splitlines() for line in comments)
    assert "removed: serving.image, serving.lmi" in out
    assert load_config("dev", folder).serving.backend == "vllm_neuronx"


def test_a_profile_the_rehearsal_refuses_is_not_written(tmp_path):
    """staging on prod's model and backend would rehearse what it declares it does not: the synth's line, nothing
    written."""
    folder = config_copy(tmp_path / "config")
    before = {p.name: p.read_bytes() for p in folder.glob("*.yaml")}
    code, out, err = write_with_tool(folder, "llama-2-7b-chat-hf", "lmi_neuronx", "staging")
    assert (code, out) == (2, "")
    assert len(err.splitlines()) == 1
    assert err.startswith("make profile: config/staging.yaml with this profile would fail the synth; nothing written:")
    assert "rehearses.not_covered" in err and "remove the entry" in err
    assert {p.name: p.read_bytes() for p in folder.glob("*.yaml")} == before


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


def test_an_environment_without_a_file_is_refused_naming_the_known_ones(tmp_path):
    folder = config_copy(tmp_path / "config")
    code, out, err = write_with_tool(folder, "qwen2.5-7b-instruct", "vllm_neuronx", "qa")
    assert (code, out) == (2, "")
    assert err == "make profile: no config/qa.yaml; known environments: dev, local, prod, staging\n"


def test_a_line_edit_config_edit_cannot_make_is_refused_and_nothing_written(tmp_path):
    """A section written in flow style ({...}) is edited by hand: config_edit's line, nothing written."""
    folder = config_copy(tmp_path / "config")
    text = (folder / "dev.yaml").read_text()
    start = text.index("  autoscaling:\n")
    end = text.index("  alarms:\n")
    flow = "  autoscaling: {scale_out_cooldown_seconds: 600, min_capacity: 1, max_capacity: 2}\n"
    (folder / "dev.yaml").write_text(text[:start] + flow + text[end:])
    before = (folder / "dev.yaml").read_bytes()
    code, out, err = write_with_tool(folder, "llama-2-7b-chat-hf", "lmi_neuronx", "dev")
    assert (code, out) == (2, "")
    assert err == (
        "make profile: config/dev.yaml: cannot be edited line by line: the mapping is empty or in flow style {...}; "
        "edit it by hand; nothing written\n"
    )
    assert (folder / "dev.yaml").read_bytes() == before


def test_a_gated_base_gets_its_profile_and_the_line_that_its_download_needs_a_token(tmp_path):
    """No serving profile changes whether the job may download a gated base: the profile is printed with the
    loader's line; written into an environment without a token or a copy, it is refused with that line."""
    line = (
        "config/staging.yaml: training.hyperparameters.model_id: got 'meta-llama/Llama-3.1-8B-Instruct', gated on the "
        "hub (config/models/llama-3.1-8b-instruct.yaml: gated: true), and the training job has no token: set "
        "training.hub_token_secret: <secret ARN> (a Secrets Manager secret holding a hub token with access) or copy "
        "the weights into the bucket with `make base-model MODEL=meta-llama/Llama-3.1-8B-Instruct UPLOAD=staging`"
    )
    code, out, err = run_tool("--model", "llama-3.1-8b-instruct", "--backend", "vllm_neuronx")
    assert code == 0 and out.endswith(f"before training: {line}\n")
    folder = config_copy(tmp_path / "config")
    before = (folder / "staging.yaml").read_bytes()
    code, out, err = write_with_tool(folder, "llama-3.1-8b-instruct", "vllm_neuronx", "staging")
    assert (code, out) == (2, "")
    assert err == f"make profile: config/staging.yaml with this profile would fail the synth; nothing written: {line}\n"
    assert (folder / "staging.yaml").read_bytes() == before
