"""The served version (config/<env>.model.json) against the environment's profile, the training base against it,
and staging's declaration of what it does not rehearse: each refusal one line, from load_config (what the synth
runs first) without synthesizing."""

from __future__ import annotations

import json

import pytest
import yaml

from stacks.config import ConfigError, load_config
from stacks.config.model_lock import lock_text, parse_lock, read_lock
from stacks.serving.backends.lmi_neuronx.config import NEURONX_CC as COMPILERS
from tests.synth import FACTS, ROOT, add_record, lock_document, with_catalog

DEV = yaml.safe_load((ROOT / "config" / "dev.yaml").read_text())
STAGING = yaml.safe_load((ROOT / "config" / "staging.yaml").read_text())
PROD = yaml.safe_load((ROOT / "config" / "prod.yaml").read_text())
DEV_ARN = lock_document("dev")["model_package_arn"]
STAGING_ARN = lock_document("staging")["model_package_arn"]
PROD_ARN = lock_document("prod")["model_package_arn"]
STAGING_RUN = lock_document("staging")["compiled_prefix"].split("/")[1]  # the Training workflow run's folder
NEURONX_CC = COMPILERS[(0, 30, 0)]  # the neuronx-cc of djl-inference:0.30.0-neuronx-sdk2.20.1


def _changed(base: dict, **changes) -> dict:
    """`base` with `a__b=value` set (None deletes)."""
    out = json.loads(json.dumps(base))
    for dotted, value in changes.items():
        *parents, leaf = dotted.split("__")
        node = out
        for part in parents:
            node = node.setdefault(part, {})
        if value is None:
            node.pop(leaf, None)
        else:
            node[leaf] = value
    return out


RECORD = "__record__"  # a case's own base-model record: tests.synth.add_record's arguments


def _based_on(base: dict, hub_id: str, like: str, **changes) -> dict:
    """`base` training (and so serving) a record of its own: `like`'s facts with `changes`."""
    return {
        **_changed(base, training__hyperparameters__model_id=hub_id),
        RECORD: dict(hub_id=hub_id, like=like, **changes),
    }


def _load(tmp_path, env: str, settings: dict, lock: dict | str | None, others: dict | None = None):
    with_catalog(tmp_path)
    settings = dict(settings)
    record = settings.pop(RECORD, None)
    if record is not None:
        add_record(tmp_path, **record)
    for name, content in {env: settings, **(others or {})}.items():
        (tmp_path / f"{name}.yaml").write_text(yaml.safe_dump(content, sort_keys=False))
    if lock is not None:
        text = lock if isinstance(lock, str) else json.dumps(lock, indent=2, sort_keys=True) + "\n"
        (tmp_path / f"{env}.model.json").write_text(text)
    return load_config(env, tmp_path)


def _refusal(tmp_path, env, settings, lock, others=None) -> str:
    with pytest.raises(ConfigError) as caught:
        _load(tmp_path, env, settings, lock, others)
    text = str(caught.value)
    assert "\n" not in text
    return text.replace(tmp_path.as_posix() + "/", "")


LOCK_REFUSALS = [
    (
        "not-approved",
        "dev",
        DEV,
        lock_document("dev", approval_status="PendingManualApproval"),
        f"dev.model.json: approval_status: {DEV_ARN} is PendingManualApproval; only an Approved version is served: "
        "approve it in the model registry (a person's decision), then promote it again",
    ),
    (
        "another-backend",
        "dev",
        DEV,
        lock_document("dev", serving__backend="vllm_neuronx"),
        f"dev.model.json: serving.backend: {DEV_ARN} was registered for backend vllm_neuronx; dev.yaml "
        "serving.backend is lmi_neuronx: promote a version registered for lmi_neuronx",
    ),
    (
        "another-image",
        "dev",
        DEV,
        lock_document(
            "dev", serving__image="763104351884.dkr.ecr.us-east-1.amazonaws.com/djl-inference:0.29.0-neuronx"
        ),
        f"dev.model.json: serving.image: {DEV_ARN} runs image 763104351884.dkr.ecr.us-east-1.amazonaws.com/"
        "djl-inference:0.29.0-neuronx; dev.yaml serving.image is lmi_neuronx (",
    ),
    (
        "instance-not-listed",
        "prod",
        PROD,
        lock_document("prod", serving__instance_types=["ml.inf2.48xlarge"]),
        f"prod.model.json: serving.instance_types: {PROD_ARN} lists ml.inf2.48xlarge; prod.yaml "
        "serving.instance_type is ml.inf2.24xlarge: promote a version registered for ml.inf2.24xlarge",
    ),
    (
        "instances-not-listed",
        "prod",
        PROD,
        lock_document("prod", serving__instance_types=["ml.inf2.48xlarge", "ml.inf2.8xlarge"]),
        f"prod.model.json: serving.instance_types: {PROD_ARN} lists ml.inf2.48xlarge, ml.inf2.8xlarge; prod.yaml "
        "serving.instance_type is ml.inf2.24xlarge: promote a version registered for ml.inf2.24xlarge",
    ),
    (
        "another-architecture",
        "staging",
        STAGING,
        lock_document("staging", facts__model_type="mistral", facts__architecture="MistralForCausalLM"),
        f"staging.model.json: facts.model_type: {STAGING_ARN}: model_type mistral (MistralForCausalLM); staging.yaml "
        "serving.backend vllm_neuronx loads granite, llama, llama4_text, mixtral, phi3, qwen2, qwen3, qwen3_moe, "
        "smollm3: serve it with backend lmi_neuronx",
    ),
    (
        "another-size",
        "prod",
        PROD,
        lock_document("prod", facts__parameters=13015864320),
        f"prod.model.json: facts.parameters: {PROD_ARN}: 13015864320 parameters (13.02 B); prod.yaml trains and "
        "serves NousResearch/Llama-2-7b-chat-hf, 6.74 B (tolerance 0.67 B): promote a version of that base, or make "
        "the environment's training base the one this version was trained from",
    ),
    (
        "context-shorter-than-served",
        "staging",
        STAGING,
        lock_document("staging", facts__context_length=2048),
        f"staging.model.json: facts.context_length: {STAGING_ARN}: context_length 2048 (max_position_embeddings); "
        "staging.yaml serving.neuron.sequence_length is 4096: serve at most 2048 positions or a model with a "
        "longer context",
    ),
    (
        "tp-does-not-divide-heads",
        "prod",
        PROD,
        lock_document("prod", facts__num_attention_heads=28, facts__num_key_value_heads=4),
        f"prod.model.json: facts.num_attention_heads: {PROD_ARN}: 28 attention heads; prod.yaml "
        "serving.lmi.tensor_parallel_degree is 8, which does not divide them: use one of 1, 2, 4, 7 "
        "(ml.inf2.24xlarge has 12 NeuronCores)",
    ),
    (
        "tp-and-kv-heads-do-not-divide",
        "staging",
        STAGING,
        lock_document("staging", facts__num_key_value_heads=3, facts__num_attention_heads=24),
        f"staging.model.json: facts.num_key_value_heads: {STAGING_ARN}: 3 key/value heads; staging.yaml "
        "serving.neuron.tensor_parallel_size is 2: vLLM Neuron shards K/V heads only when one of the two divides "
        "the other (else it replicates them per query head): use a TP degree that divides 3 or a multiple of it",
    ),
    (
        "weights-exceed-neuron-core-memory",
        "staging",
        # a 12 B base (its own check: 24 GB fit) and a 13 B version, within the tolerance
        _based_on(STAGING, "test/qwen-12b", "qwen2.5-7b-instruct", parameters=12_000_000_000),
        lock_document("staging", facts__parameters=13_000_000_000),
        f"staging.model.json: facts.parameters: {STAGING_ARN}: 13000000000 parameters on ml.inf2.8xlarge "
        "(staging.yaml serving.instance_type): 26.0 GB of 16-bit weights exceed 80% of 2 x 16 GB NeuronCore memory "
        "(staging.yaml serving.neuron.tensor_parallel_size 2): raise the TP degree",
    ),
    (
        "vllm-without-compiled-model",
        "staging",
        STAGING,
        lock_document("staging", compiled_prefix=None),
        f"staging.model.json: compiled_prefix: {STAGING_ARN} has no compiled model; staging.yaml serving.backend "
        "vllm_neuronx serves one of shape neuron/bs4-seq4096-tp2/: promote the compiled version "
        "(RegisterCompiledModel)",
    ),
    (
        "compiled-for-another-shape",
        "staging",
        _changed(STAGING, serving__neuron__batch_size=8),
        lock_document("staging"),
        f"staging.model.json: compiled_prefix: {STAGING_ARN} is compiled as models/{STAGING_RUN}/neuron/bs4-seq4096-"
        f"tp2/{STAGING_RUN.replace('-0-0', '-n-0')}/output/model/; staging.yaml serves shape neuron/bs8-seq4096-tp2/ "
        "(vLLM Neuron refuses another): promote a version compiled for that shape, or serve the shape it was "
        "compiled for",
    ),
    (
        "lmi-compiled-for-another-shape",
        "prod",
        PROD,
        lock_document(
            "prod", compiled_prefix=f"models/j/neuron/tp2-np4096-bs8-fp16-neuronx-cc-{NEURONX_CC}/c/output/model/"
        ),
        f"prod.model.json: compiled_prefix: {PROD_ARN} is compiled as models/j/neuron/tp2-np4096-bs8-fp16-neuronx-cc-"
        f"{NEURONX_CC}/c/output/model/; prod.yaml serves shape neuron/tp8-np4096-bs8-fp16-neuronx-cc-{NEURONX_CC}/ "
        "(LMI NeuronX refuses another)",
    ),
    (
        "lmi-compiled-for-another-batch",
        "prod",
        PROD,
        lock_document("prod", compiled__batch_size=4),
        f"prod.model.json: compiled.batch_size: {PROD_ARN} is compiled with batch_size 4 (serves 8); prod.yaml "
        "serving.lmi serves tensor_parallel_degree 8, n_positions 4096, batch_size 8, dtype fp16: promote a version "
        "compiled for that shape, or serve the shape it was compiled for",
    ),
    (
        "lmi-compiled-by-another-compiler",
        "prod",
        PROD,
        lock_document("prod", compiled__compiler_version="2.14.227.0+2d4c5fb3"),
        f"prod.model.json: compiled.compiler_version: {PROD_ARN} is compiled by neuronx-cc 2.14.227.0+2d4c5fb3; "
        f"prod.yaml serving.image lmi_neuronx has neuronx-cc {NEURONX_CC}, which fails to load it (djl-serving "
        "model-artifacts.md): compile it again in the serving image",
    ),
    (
        "lmi-compiled-without-its-recorded-shape",
        "dev",
        DEV,
        lock_document("dev", compiled=None),
        f"dev.model.json: compiled: {DEV_ARN} records no compiled shape or compiler (compiled_* metadata, read from "
        "the compiled model's config.json by ReadCompiledFacts): register it again with the current Training workflow",
    ),
    (
        "lmi-without-compiled-model",
        "dev",
        DEV,
        lock_document("dev", compiled_prefix=None),
        f"dev.model.json: compiled_prefix: {DEV_ARN} has no compiled model; dev.yaml serving.backend lmi_neuronx "
        f"serves one of shape neuron/tp2-np2048-bs4-fp16-neuronx-cc-{NEURONX_CC}/: promote the compiled version "
        "(RegisterCompiledModel)",
    ),
    (
        "not-an-arn",
        "dev",
        DEV,
        lock_document("dev", model_package_arn="llminf2devdata-models/3"),
        "dev.model.json: model_package_arn: got 'llminf2devdata-models/3'; not a model package version ARN",
    ),
    (
        "a-fact-missing",
        "dev",
        DEV,
        lock_document("dev", facts={k: v for k, v in FACTS["tinyllama"].items() if k != "context_length"}),
        "dev.model.json: facts.context_length: missing; this setting is required",
    ),
    ("not-json", "dev", DEV, "{", "dev.model.json: line 1: invalid JSON: Expecting property name"),
]


@pytest.mark.parametrize(
    ("case", "env", "settings", "lock", "expected"), LOCK_REFUSALS, ids=[c[0] for c in LOCK_REFUSALS]
)
def test_a_served_version_that_does_not_fit_fails_with_one_line(tmp_path, case, env, settings, lock, expected):
    others = {"prod": PROD} if env == "staging" else None
    assert _refusal(tmp_path, env, settings, lock, others).startswith(expected)


def test_the_shipped_profiles_serve_their_recorded_versions(tmp_path):
    for env, settings in (("dev", DEV), ("prod", PROD)):
        config = _load(tmp_path, env, settings, lock_document(env))
        assert config.serves and config.model.version == lock_document(env)["model_package_arn"]


def test_the_lock_has_one_text(tmp_path):
    """Sorted keys, 2-space indent, trailing newline; read back it is the same lock."""
    lock = parse_lock(lock_document("staging"), "staging.model.json")
    text = lock_text(lock)
    assert text == json.dumps(json.loads(text), sort_keys=True, indent=2) + "\n" and text.endswith("}\n")
    (tmp_path / "staging.model.json").write_text(text)
    assert read_lock(tmp_path / "staging.model.json") == lock
    assert json.loads(text)["facts"]["chat_template"] is True and json.loads(text)["compiled_prefix"].endswith("/")


TRAINING_REFUSALS = [
    (
        "dev-as-it-shipped",  # the Llama-2 base under the TinyLlama profile: its compile host is too small
        "dev",
        _changed(DEV, training__hyperparameters__model_id="NousResearch/Llama-2-7b-chat-hf"),
        "dev.yaml: training.neuron_compile.instance_type: got 'ml.trn1.2xlarge' (32 GiB host RAM); compiling the "
        "6.74B-parameter NousResearch/Llama-2-7b-chat-hf needs ~101 GiB",
    ),
    (
        "base-the-backend-cannot-load",
        "dev",
        # compiled at start-up, so the compile step's host rule (its own case) does not answer first
        _changed(
            DEV, training__hyperparameters__model_id="Qwen/Qwen2.5-7B-Instruct", training__neuron_compile__enabled=False
        ),
        "dev.yaml: training.hyperparameters.model_id: the training base Qwen/Qwen2.5-7B-Instruct "
        "(config/models/qwen2.5-7b-instruct.yaml): model_type qwen2 (Qwen2ForCausalLM); dev.yaml serving.backend "
        "lmi_neuronx loads",
    ),
    (
        "base-without-a-record",
        "dev",
        _changed(DEV, training__hyperparameters__model_id="mistralai/Mistral-7B-v0.1"),
        "dev.yaml: training.hyperparameters.model_id: got 'mistralai/Mistral-7B-v0.1'; no record in config/models/ "
        "says what it is, so nothing can check that serving can serve it: run `make base-model "
        "MODEL=mistralai/Mistral-7B-v0.1` and commit the record it writes",
    ),
    (
        "offline-base-key-of-another-family",
        "prod",
        _changed(PROD, training__base_model_key="base-models/qwen2.5-7b-instruct/"),
        "prod.yaml: training.base_model_key: the training base Qwen/Qwen2.5-7B-Instruct "
        "(config/models/qwen2.5-7b-instruct.yaml): model_type qwen2",
    ),
    (
        "context-shorter-than-served",
        "dev",
        _changed(DEV, serving__lmi__n_positions=4096),
        "dev.yaml: training.hyperparameters.model_id: the training base TinyLlama/TinyLlama-1.1B-Chat-v1.0 "
        "(config/models/tinyllama-1.1b-chat-v1.0.yaml): context_length 2048 (max_position_embeddings); dev.yaml "
        "serving.lmi.n_positions is 4096",
    ),
]


@pytest.mark.parametrize(
    ("case", "env", "settings", "expected"), TRAINING_REFUSALS, ids=[c[0] for c in TRAINING_REFUSALS]
)
def test_a_profile_that_cannot_serve_what_the_environment_trains_fails(tmp_path, case, env, settings, expected):
    assert _refusal(tmp_path, env, settings, None).startswith(expected)


@pytest.mark.parametrize("env", ["dev", "local", "prod", "staging"])
def test_each_shipped_environment_trains_what_it_can_serve(env):
    config = load_config(env, ROOT / "config")
    assert (
        config.base_model is not None and config.serving.model_parameters_billions == config.base_model.record.billions
    )


def test_staging_declares_exactly_how_it_differs_from_prod():
    from stacks.config.rehearsal import differences

    staging, prod = (load_config(env, ROOT / "config") for env in ("staging", "prod"))
    assert (
        set(differences(staging, prod))
        == {a.aspect for a in staging.rehearses.not_covered}
        == {
            "backend",
            "model_family",
            "compile_path",
            "hosting",
        }
    )


def _without(aspect: str) -> dict:
    kept = [item for item in STAGING["rehearses"]["not_covered"] if item["aspect"] != aspect]
    return _changed(STAGING, rehearses__not_covered=kept)


REHEARSAL_REFUSALS = [
    (
        "a-difference-not-declared",
        _without("backend"),
        {"prod": PROD},
        "staging.yaml: rehearses.not_covered: staging and prod differ in backend (vllm_neuronx here, lmi_neuronx in "
        "prod.yaml) but it is not declared: add {aspect: backend, reason: ...}, or make them match",
    ),
    (
        "a-declared-difference-that-is-not-there",
        STAGING,
        # prod made to rehearse nothing new: it serves staging's backend and family and compiles like it
        {"prod": _changed(STAGING, rehearses=None)},
        "staging.yaml: rehearses.not_covered[0]: declares backend not covered, but staging and prod have the same "
        "backend (vllm_neuronx): remove the entry",
    ),
    (
        "an-aspect-listed-twice",
        _changed(
            STAGING,
            rehearses__not_covered=[*STAGING["rehearses"]["not_covered"], STAGING["rehearses"]["not_covered"][0]],
        ),
        {"prod": PROD},
        "staging.yaml: rehearses.not_covered[4].aspect: backend is listed twice",
    ),
    (
        "rehearsing-itself",
        _changed(STAGING, rehearses__environment="staging"),
        None,
        "staging.yaml: rehearses.environment: names this environment itself: name the one it rehearses",
    ),
    (
        "an-unknown-aspect",
        _changed(STAGING, rehearses__not_covered=[{"aspect": "region", "reason": "staging runs in one region only"}]),
        {"prod": PROD},
        "staging.yaml: rehearses.not_covered[0].aspect: got 'region'; allowed: 'backend', 'model_family', "
        "'compile_path', 'hosting'",
    ),
]


@pytest.mark.parametrize(
    ("case", "settings", "others", "expected"), REHEARSAL_REFUSALS, ids=[c[0] for c in REHEARSAL_REFUSALS]
)
def test_a_rehearsal_declaration_that_disagrees_with_the_files_fails(tmp_path, case, settings, others, expected):
    assert _refusal(tmp_path, "staging", settings, None, others).startswith(expected)


def test_the_facts_a_rule_reads_cannot_change_under_it():
    from dataclasses import FrozenInstanceError

    from stacks.config.served_model import ModelShape, Subject

    shape = ModelShape("llama", "LlamaForCausalLM", 1100048384, 2048, 32, 4)
    subject = Subject("version", "dev.model.json", {})
    for thing, name in ((shape, "parameters"), (subject, "name")):
        with pytest.raises(FrozenInstanceError):
            setattr(thing, name, None)


# the other backend's name, and the fix when none loads the architecture
ARCHITECTURE_FIXES = [
    ("qwen2", "Qwen2ForCausalLM", "serve it with backend vllm_neuronx"),
    ("falcon", "FalconForCausalLM", "promote a model of one of those architectures"),
]


@pytest.mark.parametrize(("model_type", "architecture", "fix"), ARCHITECTURE_FIXES)
def test_a_version_of_another_architecture_names_the_backend_that_loads_it(tmp_path, model_type, architecture, fix):
    lock = lock_document("dev", facts__model_type=model_type, facts__architecture=architecture)
    text = _refusal(tmp_path, "dev", DEV, lock)
    assert text.startswith(f"dev.model.json: facts.model_type: {DEV_ARN}: model_type {model_type} ({architecture}); ")
    assert text.endswith(f": {fix}")


def test_a_size_exactly_at_the_tolerance_is_served(tmp_path):
    """At most 10 % off the profile: 5.5 B against a 5.0 B profile is exactly 0.5 B off (all exact in binary)."""
    settings = _based_on(STAGING, "test/qwen-5b", "qwen2.5-7b-instruct", parameters=5_000_000_000)
    lock = lock_document("staging", facts__parameters=5_500_000_000)
    config = _load(tmp_path, "staging", settings, lock, {"prod": PROD})
    assert config.model.facts.parameters == 5_500_000_000


def test_a_tp_refusal_lists_every_degree_up_to_the_core_count(tmp_path):
    """156 heads: 12 divides them (the 24xlarge's core count, listed), 13 too (more cores than it has, not)."""
    lock = lock_document("prod", facts__num_attention_heads=156, facts__num_key_value_heads=4)
    assert _refusal(tmp_path, "prod", PROD, lock).endswith(
        "is 8, which does not divide them: use one of 1, 2, 3, 4, 6, 12 (ml.inf2.24xlarge has 12 NeuronCores)"
    )


def test_one_kv_head_is_sharded_across_any_tp_degree(tmp_path):
    """Multi-query attention (one K/V head): the head divides every TP degree, so vLLM Neuron replicates it."""
    config = _load(tmp_path, "staging", STAGING, lock_document("staging", facts__num_key_value_heads=1), {"prod": PROD})
    assert config.model.facts.num_key_value_heads == 1


def test_weights_that_fill_the_memory_share_exactly_are_served(tmp_path):
    """12.8 B at 2 bytes is 25.6 GB: exactly 80 % of 2 x 16 GB, which fits (the refusal is for exceeding it)."""
    settings = _based_on(STAGING, "test/qwen-12.8b", "qwen2.5-7b-instruct", parameters=12_800_000_000)
    lock = lock_document("staging", facts__parameters=12_800_000_000)
    assert _load(tmp_path, "staging", settings, lock, {"prod": PROD}).model.facts.parameters == 12_800_000_000


def _start_up_compiled(**changes) -> dict:
    """dev compiling at start-up: no ahead-of-time partition in its Training workflow."""
    return _changed(DEV, training__neuron_compile__enabled=False, **changes)


def test_a_7b_version_without_a_graph_on_a_small_host_fails(tmp_path):
    settings = _start_up_compiled(training__hyperparameters__model_id="NousResearch/Llama-2-7b-chat-hf")
    lock = lock_document("dev", facts__parameters=6738415616, compiled_prefix=None, compiled=None)
    text = _refusal(tmp_path, "dev", settings, lock)
    assert text.startswith(f"dev.model.json: facts.parameters: {DEV_ARN}: 6738415616 parameters on ")
    assert "without a precompiled graph is compiled at start-up" in text


def test_lmi_compiling_at_start_up_serves_the_merged_model(tmp_path):
    lock = lock_document("dev", compiled_prefix=None, compiled=None)
    config = _load(tmp_path, "dev", _start_up_compiled(), lock)
    assert config.serving.model_prefix == lock["model_prefix"] and config.serving.compiled_graph_prefix is None


def test_lmi_serves_the_compiled_model_as_its_model(tmp_path):
    config = _load(tmp_path, "dev", DEV, lock_document("dev"))
    assert config.serving.model_prefix == lock_document("dev")["compiled_prefix"]


def test_an_environment_without_serving_refuses_its_lock(tmp_path):
    settings = {k: v for k, v in DEV.items() if k != "serving"}
    assert _refusal(tmp_path, "dev", settings, lock_document("dev")) == (
        f"dev.model.json: model_package_arn: {DEV_ARN}: dev.yaml has no serving section to serve it"
    )


def test_another_image_lists_every_uri_of_the_configured_one(tmp_path):
    from stacks.image_table import image_uris

    image = "763104351884.dkr.ecr.us-east-1.amazonaws.com/djl-inference:0.29.0-neuronx"
    text = _refusal(tmp_path, "dev", DEV, lock_document("dev", serving__image=image))
    assert text.endswith(f"({', '.join(image_uris('lmi_neuronx'))}): promote a version built for that image")


# transformers-neuronx's amp names against LMI's option.dtype (djl_python tnx_properties.py)
AMP_OF_DTYPE = [("fp32", "f32"), ("bf16", "bf16")]


@pytest.mark.parametrize(("dtype", "amp"), AMP_OF_DTYPE)
def test_a_compiled_amp_name_matches_the_lmi_dtype_it_is(tmp_path, dtype, amp):
    document = lock_document("dev")
    prefix = document["compiled_prefix"].replace("-fp16-", f"-{dtype}-")
    lock = lock_document("dev", compiled_prefix=prefix, compiled__dtype=amp)
    config = _load(tmp_path, "dev", _changed(DEV, serving__lmi__dtype=dtype), lock)
    assert config.model.compiled.dtype == amp


def test_every_differing_compiled_fact_is_named(tmp_path):
    lock = lock_document("prod", compiled__batch_size=4, compiled__n_positions=2048)
    assert _refusal(tmp_path, "prod", PROD, lock).startswith(
        f"prod.model.json: compiled.n_positions: {PROD_ARN} is compiled with n_positions 2048 (serves 4096), "
        "batch_size 4 (serves 8); "
    )
