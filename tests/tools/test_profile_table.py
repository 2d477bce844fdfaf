"""Every recorded and published model on every backend: a profile the synth loads, or one line saying why; the
committed table is what the tool prints for them."""

from __future__ import annotations

import pytest
import yaml

from stacks.config import load_config
from stacks.config.model_catalog import BaseModel, read_catalog
from stacks.config.profile import applied
from stacks.config.profile_search import NoProfile, derive
from stacks.serving.backends import backend, names
from tests.synth import ROOT
from tests.tools.test_profile import PRICES, TABLE
from tools.profile.table import HEADER, catalog_with, rows
from tools.profile.targets import TEMPLATES, read_target

PUBLISHED = ROOT / "tests" / "data" / "model_configs"


@pytest.fixture(scope="module")
def catalog(tmp_path_factory):
    """config/ with a record of each published config.json besides the shipped ones (built once: ~4 s), and the
    built records' names."""
    return catalog_with(ROOT / "config", PUBLISHED, tmp_path_factory.mktemp("profiles"))


def one_line_reason(line: str, base: BaseModel, backend_name: str) -> bool:
    """A refusal names the architecture the backend does not load, else a size or head fact of the model."""
    if "\n" in line.strip():
        return False
    if base.record.model_type not in backend(backend_name).architectures:
        return f"model_type {base.record.model_type}" in line and "loads" in line
    return any(fact in line for fact in ("parameters", "GiB", " GB ", "attention heads", "key/value heads"))


SECRET = "arn:aws:secretsmanager:us-east-1:123456789012:secret:llm-inf2/hub-token-AbC123"


@pytest.mark.parametrize("backend_name", names())
def test_every_model_on_every_backend_synthesizes_or_says_why_in_one_line(catalog, backend_name):
    catalog, built = catalog
    """Whatever the catalog holds: the profile, written into the backend's template environment, loads with the
    synth's loader and trains and serves that model; or the refusal is one line naming the architecture the backend
    does not load, or a size or head fact."""
    env = TEMPLATES[backend_name]
    path = catalog / f"{env}.yaml"
    pristine = path.read_text()
    bases = read_catalog(catalog)
    assert built and built <= set(bases)  # the published models are in
    for base in bases.values():
        try:
            derived = derive(read_target(catalog, env), base, backend_name, PRICES)
        except NoProfile as refusal:
            assert one_line_reason(str(refusal), base, backend_name), (base.name, str(refusal))
            continue
        written = applied(yaml.safe_load(pristine), derived.changes)
        assert (derived.access is not None) is base.record.gated, (base.name, derived.access)
        if base.record.gated:  # the one setting no profile makes: the token the download needs, as a user adds it
            written["training"]["hub_token_secret"] = SECRET
        path.write_text(yaml.safe_dump(written, sort_keys=False))
        loaded = load_config(env, catalog, served=False)
        assert (loaded.base_model.name, loaded.serving.backend) == (base.name, backend_name)
        path.write_text(pristine)


@pytest.mark.parametrize(
    ("backend_name", "because"),
    [
        ("lmi_neuronx", "70.55B-parameter meta-llama/Llama-3.3-70B-Instruct needs ~1058 GiB"),
        ("vllm_neuronx", "64 attention heads; config/staging.yaml serving.neuron.tensor_parallel_size is 24"),
    ],
)
def test_a_model_too_large_for_every_inf2_size_is_refused_in_one_line(catalog, backend_name, because):
    catalog, _ = catalog
    """Llama-3.3-70B (70,553,706,496 parameters, 64 heads, published config.json): LMI's partition has no ml.trn1
    host with the memory; vLLM Neuron's TP degrees with the NeuronCore memory for it (24) do not divide its heads."""
    base = read_catalog(catalog)["llama-3.3-70b-instruct"]
    with pytest.raises(NoProfile) as refusal:
        derive(read_target(catalog, TEMPLATES[backend_name]), base, backend_name, PRICES)
    line = str(refusal.value)
    assert line.startswith(f"meta-llama/Llama-3.3-70B-Instruct on {backend_name}: no ml.inf2 profile passes the synth")
    assert because in line and "\n" not in line


def test_the_committed_table_is_what_the_tool_prints(catalog):
    """docs/model-profiles.md is `python -m tools.profile --table --configs tests/data/model_configs`: the catalog
    the fixture built is the one the tool builds."""
    catalog, built = catalog
    assert HEADER + rows(catalog, built, TABLE) == (ROOT / "docs" / "model-profiles.md").read_text()
