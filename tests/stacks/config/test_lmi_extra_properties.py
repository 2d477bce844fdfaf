"""One serving.properties template for every LMI NeuronX model; a model's extra LMI keys come from
serving.lmi.extra_properties, each refused in one line when LMI NeuronX 0.30 does not document it, the endpoint or the
template sets it, or a typed setting owns it."""

from __future__ import annotations

import dataclasses
import json

import pytest

from stacks.config import ConfigError, load_config
from stacks.config.serving_properties import as_environment
from stacks.serving.backends.lmi_neuronx.compile_step import partition_environment
from stacks.serving.backends.lmi_neuronx.config import LmiOptions, render_properties
from tests.stacks.config.test_app_config_errors import PROD_VALID, VALID, _with, write_case
from tests.synth import ROOT

FIELD = "config/dev.yaml: serving.lmi.extra_properties"
# LMI NeuronX 0.30.0's documented keys without a serving.lmi setting: djl-serving branch 0.30.0-dlc,
# serving/docs/lmi/deployment_guide/configurations.md ("LMI Common Configurations"),
# serving/docs/lmi/user_guides/tnx_user_guide.md ("Advanced Transformers NeuronX Configurations") and
# serving/docs/streaming.md (option.enable_streaming); the speculative-decoding keys of the same table are left out.
DOCUMENTED = (
    "option.attention_layout, option.cache_layout, option.collectives_layout, "
    "option.enable_mixed_precision_accumulation, option.enable_saturate_infinity, option.enable_streaming, "
    "option.fuse_qkv, option.load_in_8bit, "
    "option.low_cpu_mem_usage, option.on_device_embedding, option.on_device_generation, option.parallel_loading, "
    "option.qkv_tiling, option.revision, option.shard_over_sequence, option.trust_remote_code, option.unroll, "
    "option.weight_tiling"
)
ENDPOINT = "which a serving.properties line would override; remove it"
REFUSED = [
    (
        "model-id",
        {"option.model_id": "s3://bucket/models/other/"},
        f"{FIELD}.option.model_id: set by the endpoint from serving.model_prefix (OPTION_MODEL_ID), {ENDPOINT}",
    ),
    (
        "s3url",
        {"option.s3url": "s3://bucket/models/other/"},
        f"{FIELD}.option.s3url: set by the endpoint from serving.model_prefix (OPTION_MODEL_ID), {ENDPOINT}",
    ),
    (
        "compiled-graph-path",
        {"option.compiled_graph_path": "s3://bucket/neuron/"},
        f"{FIELD}.option.compiled_graph_path: set by the endpoint from serving.compiled_graph_prefix "
        f"(OPTION_COMPILED_GRAPH_PATH), {ENDPOINT}",
    ),
    (
        "engine",
        {"engine": "MPI"},
        f"{FIELD}.engine: the template sets engine=Python, which the LMI NeuronX container needs; remove it",
    ),
    (
        "entry-point",
        {"option.entryPoint": "djl_python.huggingface"},
        f"{FIELD}.option.entryPoint: the template sets option.entryPoint=djl_python.transformers_neuronx, which the "
        "LMI NeuronX container needs; remove it",
    ),
    (
        "typed-setting",
        {"option.tensor_parallel_degree": 8},
        f"{FIELD}.option.tensor_parallel_degree: serving.lmi.tensor_parallel_degree is its setting; remove this entry "
        "and set serving.lmi.tensor_parallel_degree",
    ),
    (
        "draft-model",
        {"option.speculative_draft_model": "s3://bucket/draft/"},
        f"{FIELD}.option.speculative_draft_model: speculative decoding loads a draft model from outside the pinned "
        "prefix, which the endpoint's role cannot read; remove it",
    ),
    (
        "typo",
        {"option.trust_remote_cod": True},
        f"{FIELD}.option.trust_remote_cod: not a key LMI NeuronX 0.30 documents without a setting of its own; did you "
        f"mean 'option.trust_remote_code'? allowed: {DOCUMENTED}",
    ),
    (
        "float-value",
        {"option.unroll": 1.5},
        f"{FIELD}.option.unroll: got 1.5; expected a string, a boolean (true/false) or an integer",
    ),
    (
        "null-value",
        {"option.revision": None},
        f"{FIELD}.option.revision: got None; expected a string, a boolean (true/false) or an integer",
    ),
    (
        "line-break",
        {"option.revision": "main\noption.model_id=s3://elsewhere/"},
        f"{FIELD}.option.revision: got 'main\\noption.model_id=s3://elsewhere/'; a non-empty value on one line (a "
        "line break would add a serving.properties line)",
    ),
    (
        "empty-value",
        {"option.revision": ""},
        f"{FIELD}.option.revision: got ''; a non-empty value on one line (a line break would add a serving.properties "
        "line)",
    ),
    ("not-a-mapping", ["option.revision=main"], f"{FIELD}: got ['option.revision=main']; expected a mapping"),
]


def _load(tmp_path, monkeypatch, content: dict, env_name: str = "dev"):
    """load_config as `make synth` runs it from the repository root, so the source reads config/<env>.yaml."""
    write_case(tmp_path / "config", content, env_name)
    monkeypatch.chdir(tmp_path)
    return load_config(env_name, "config")


@pytest.mark.parametrize(("case", "extras", "line"), REFUSED, ids=[c[0] for c in REFUSED])
def test_a_bad_extra_property_is_refused_in_one_line(tmp_path, monkeypatch, case, extras, line):
    with pytest.raises(ConfigError) as caught:
        _load(tmp_path, monkeypatch, _with("serving.lmi.extra_properties", extras))
    assert str(caught.value) == line


def test_every_typed_setting_is_refused_as_an_extra_key(tmp_path, monkeypatch):
    typed = [f.name for f in dataclasses.fields(LmiOptions) if f.name != "extra_properties"]
    for name in typed:
        with pytest.raises(ConfigError) as caught:
            _load(tmp_path, monkeypatch, _with("serving.lmi.extra_properties", {f"option.{name}": "1"}))
        assert str(caught.value).endswith(f"remove this entry and set serving.lmi.{name}")


def test_a_served_environments_file_carries_its_extra_lines(tmp_path, monkeypatch):
    """dev ships them in the tarball's serving.properties, prod (isolated) as OPTION_* variables, and the compile
    step's partition reads the same ones, so the compiled graph matches what serves it."""
    extras = {"option.trust_remote_code": True, "option.fuse_qkv": True, "option.revision": "main"}
    dev = _load(tmp_path / "dev", monkeypatch, _with("serving.lmi.extra_properties", extras))
    rendered = render_properties(dev.serving)
    assert rendered.endswith("option.fuse_qkv=true\noption.revision=main\noption.trust_remote_code=true\n")
    template = (ROOT / "stacks/serving/backends/lmi_neuronx/serving.properties").read_text()
    assert rendered.splitlines()[0] == template.splitlines()[0]
    assert partition_environment(dev.serving, dev.source)["OPTION_TRUST_REMOTE_CODE"] == "true"
    prod = _load(tmp_path / "prod", monkeypatch, _with("serving.lmi.extra_properties", extras, PROD_VALID), "prod")
    assert as_environment(render_properties(prod.serving))["OPTION_FUSE_QKV"] == "true"


def test_any_model_name_renders_the_one_template_with_no_folder_of_its_own(tmp_path, monkeypatch):
    served = _load(tmp_path, monkeypatch, VALID).serving
    other = _load(tmp_path / "other", monkeypatch, _with("serving.model_name", "mistral-7b-instruct-v0.3")).serving
    assert render_properties(other) == render_properties(served)
    comments = [line.lower() for line in render_properties(served).splitlines() if line.startswith("#")]
    assert comments and not [line for line in comments if any(m in line for m in ("llama", "qwen", "mistral"))]
    assert not (ROOT / "serving_artifacts" / served.model_name).exists()


def test_a_template_line_for_an_extra_key_is_refused(tmp_path, monkeypatch):
    from stacks.config import serving_properties

    template = tmp_path / "serving.properties"
    template.write_text(serving_properties.TEMPLATE.read_text() + "option.trust_remote_code=true\n")
    monkeypatch.setattr(serving_properties, "TEMPLATE", template)
    with pytest.raises(ConfigError) as caught:
        _load(tmp_path, monkeypatch, json.loads(json.dumps(VALID)))
    assert str(caught.value) == (
        f"{template.as_posix()}: option.trust_remote_code: remove this line; the template serves every model: set it "
        "in serving.lmi.extra_properties"
    )
