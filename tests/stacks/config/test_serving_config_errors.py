"""The serving section's LMI NeuronX rules fail the real entry point with one line; risky settings only warn."""

from __future__ import annotations

import pytest

from stacks.serving.backends.lmi_neuronx import config as lmi
from stacks.serving.backends.lmi_neuronx.config import LMI_DISCONTINUED
from tests.stacks.config.test_app_config_errors import LOCK, VALID, _with, run_app, write_case
from tests.synth import FACTS, lock_document

ECR = "763104351884.dkr.ecr.us-east-1.amazonaws.com"


def _with_all(**changes) -> dict:
    config = VALID
    for path, value in changes.items():
        config = _with_base(config, path.replace("__", "."), value)
    return config


def _with_base(base: dict, path: str, value) -> dict:
    import json

    config = json.loads(json.dumps(base))
    node = config
    *parents, leaf = path.split(".")
    for part in parents:
        node = node.setdefault(part, {})
    node[leaf] = value
    return config


# One case per serving rule, through `python app.py` (each fails before aws_cdk is imported).
CASES = [
    (
        "not-inferentia2",
        _with("serving.instance_type", "ml.g5.2xlarge"),
        "serving.instance_type: got 'ml.g5.2xlarge'; the LMI NeuronX container needs an Inferentia2 type: "
        "ml.inf2.xlarge, ml.inf2.8xlarge, ml.inf2.24xlarge, ml.inf2.48xlarge",
    ),
    (
        "tp-exceeds-xlarge-cores",
        _with("serving.lmi.tensor_parallel_degree", 8),
        "serving.lmi.tensor_parallel_degree: got 8; ml.inf2.xlarge has 2 NeuronCores: use <= 2 or a type with "
        "enough cores: ml.inf2.24xlarge (12), ml.inf2.48xlarge (24)",
    ),
    (
        "seed-batch-size-with-rolling-batch",
        _with("serving.lmi.batch_size", 4),
        "serving.lmi.batch_size: got 4 with rolling_batch 'auto'; LMI 0.30.0 (>= 0.26) fails with 'Dynamic batching "
        "and rolling batch cannot be enabled at the same time': use batch_size 1 and max_rolling_batch_size",
    ),
    (
        "n-positions-exceed-context",
        _with("serving.lmi.n_positions", 4096),
        "dev.yaml: training.hyperparameters.model_id: the training base TinyLlama/TinyLlama-1.1B-Chat-v1.0 "
        "(config/models/tinyllama-1.1b-chat-v1.0.yaml): context_length 2048 (max_position_embeddings); ",
    ),
    (
        "startup-timeout-below-60",
        _with("serving.container_startup_health_check_timeout_seconds", 30),
        "serving.container_startup_health_check_timeout_seconds: got 30; expected an integer in 60..3600",
    ),
    (
        "download-timeout-below-60",
        _with("serving.model_data_download_timeout_seconds", 59),
        "serving.model_data_download_timeout_seconds: got 59; expected an integer in 60..3600",
    ),
    (
        "model-loading-timeout-above-3600",
        _with("serving.lmi.model_loading_timeout", 4000),
        "serving.lmi.model_loading_timeout: got 4000; expected an integer in 60..3600",
    ),
    (
        "startup-shorter-than-model-loading",
        _with("serving.container_startup_health_check_timeout_seconds", 300),
        "serving.container_startup_health_check_timeout_seconds: got 300; must be >= lmi.model_loading_timeout "
        "(600) or SageMaker kills the container while the model still loads",
    ),
]

# The same one-line errors for the finer rules, in-process (load_config is what app.py runs first).
MORE_CASES = [
    (
        "inferentia1-is-not-inferentia2",
        _with("serving.instance_type", "ml.inf1.xlarge"),
        "serving.instance_type: got 'ml.inf1.xlarge'; the LMI NeuronX container needs an Inferentia2 type",
    ),
    (
        "tp-exceeds-24xlarge-cores",
        _with_all(serving__instance_type="ml.inf2.24xlarge", serving__lmi__tensor_parallel_degree=24),
        "serving.lmi.tensor_parallel_degree: got 24; ml.inf2.24xlarge has 12 NeuronCores",
    ),
    (
        "batch-size-on-overridden-0.26-image",
        _with_all(
            serving__image_uri=f"{ECR}/djl-inference:0.26.0-neuronx-sdk2.16.0",
            serving__lmi__batch_size=2,
            serving__lmi__rolling_batch="tnx",
        ),
        "serving.lmi.batch_size: got 2 with rolling_batch 'tnx'; LMI 0.26.0 (>= 0.26) fails",
    ),
    (
        "image-override-hides-version",
        _with("serving.image_uri", f"{ECR}/my-lmi:latest"),
        "serving.lmi_version: cannot tell the LMI version from image_uri's tag; state it, e.g. lmi_version: 0.30.0",
    ),
    (
        "lmi-version-contradicts-tag",
        _with_all(serving__image_uri=f"{ECR}/djl-inference:0.30.0-neuronx-sdk2.20.1", serving__lmi_version="0.24.0"),
        "serving.lmi_version: got 0.24.0; image_uri's tag says 0.30.0",
    ),
    (
        "startup-timeout-above-3600",
        _with("serving.container_startup_health_check_timeout_seconds", 7200),
        "serving.container_startup_health_check_timeout_seconds: got 7200; expected an integer in 60..3600",
    ),
    (
        "rollout-shorter-than-startup",
        _with("serving.rollout.maximum_execution_timeout_seconds", 900),
        "serving.rollout.maximum_execution_timeout_seconds: got 900; must be >= startup timeout + wait interval (1020)",
    ),
    (
        "initial-count-below-autoscaling-min",
        _with_all(serving__autoscaling__min_capacity=2),
        "serving.initial_instance_count: got 1; must be within autoscaling min_capacity..max_capacity (2..2)",
    ),
    (
        "autoscaling-max-below-min",
        _with_all(serving__autoscaling__min_capacity=3, serving__autoscaling__max_capacity=2),
        "serving.autoscaling.max_capacity: got 2; must be >= min_capacity (3)",
    ),
    (
        "max-rolling-batch-without-rolling-batch",
        _with("serving.lmi.rolling_batch", "disable"),
        "serving.lmi.max_rolling_batch_size: got 4 with rolling_batch 'disable'",
    ),
    (
        "rolling-batch-unknown",
        _with("serving.lmi.rolling_batch", "lmi-dist"),
        "serving.lmi.rolling_batch: got 'lmi-dist'; allowed: 'auto', 'tnx', 'vllm', 'disable'",
    ),
    (
        "prefix-without-slash",
        _with("serving.model_prefix", "models/x"),
        "serving.model_prefix: got 'models/x'; must match",
    ),
    (
        "typo-in-lmi-option",
        _with("serving.lmi.tensor_parallel", 2),
        "serving.lmi.tensor_parallel: unknown setting; did you mean 'tensor_parallel_degree'?",
    ),
]


@pytest.mark.parametrize(("case", "content", "expected"), CASES, ids=[c[0] for c in CASES])
def test_serving_rule_fails_the_entry_point_with_one_line(tmp_path, case, content, expected):
    write_case(tmp_path, content)
    result = run_app(tmp_path, "dev")
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("config error: ") and expected in lines[0], lines[0]


@pytest.mark.parametrize(("case", "content", "expected"), MORE_CASES, ids=[c[0] for c in MORE_CASES])
def test_finer_serving_rules_raise_one_line_config_errors(tmp_path, case, content, expected):
    from stacks.config import ConfigError, load_config

    write_case(tmp_path, content)
    with pytest.raises(ConfigError) as caught:
        load_config("dev", tmp_path)
    assert expected in str(caught.value) and "\n" not in str(caught.value)


def _unserved(config: dict) -> dict:
    """The same YAML with no version promoted (the warnings are the profile's, whatever is served)."""
    return {key: value for key, value in config.items() if key != LOCK}


LLAMA_2 = "NousResearch/Llama-2-7b-chat-hf"  # a 7B profile serves what trains a 7B base
# The compile step off: LMI compiles at start-up (with the step on, dev's ml.trn1.2xlarge cannot partition a 7B).
SEVEN_B_ON_XLARGE = _unserved(
    _with_all(
        training__hyperparameters__model_id=LLAMA_2,
        training__neuron_compile__enabled=False,
    )
)


def test_7b_runtime_compile_on_16gb_host_warns_and_does_not_fail(tmp_path, monkeypatch, capsys):
    """app.main() in-process: the warning is one stderr line and the app goes on to build and synth.

    The CDK side is stubbed (no jsii start): what matters is that main() warns, then builds and synthesizes.
    """
    import json
    import sys
    import types

    import app

    built, synthesized = [], []

    class _App:
        def synth(self):
            synthesized.append(True)

    monkeypatch.setitem(sys.modules, "aws_cdk", types.SimpleNamespace(App=_App))
    monkeypatch.setitem(
        sys.modules, "stacks.application", types.SimpleNamespace(build_app=lambda cdk_app, config: built.append(config))
    )
    monkeypatch.setenv("CDK_CONTEXT_JSON", json.dumps({"env": "dev", "config_dir": str(tmp_path)}))
    monkeypatch.setenv("CDK_OUTDIR", str(tmp_path / "cdk.out"))
    write_case(tmp_path, SEVEN_B_ON_XLARGE)
    assert app.main() == 0
    assert capsys.readouterr().err.splitlines() == [
        f"config warning: {tmp_path.as_posix()}/dev.yaml: serving.backend: lmi_neuronx: {LMI_DISCONTINUED}",
        f"config warning: {tmp_path.as_posix()}/dev.yaml: serving.compiled_graph_prefix: null, so the 6.74B-parameter "
        "model is compiled at startup on ml.inf2.xlarge (16 GB host RAM); a 7B-class compile needs ~100 GB and will "
        "fail: set compiled_graph_prefix or use ml.inf2.8xlarge or larger",
    ]
    assert len(built) == 1 and built[0].serving.model_parameters_billions == 6.738415616 and synthesized == [True]


_GRAPHED_7B = lock_document(
    "dev",
    facts=FACTS["llama2"],
    compiled_prefix="models/m/neuron/tp2-np2048-bs4-fp16-neuronx-cc-2.15.141.0/c/output/model/",
)


@pytest.mark.parametrize(
    ("changes", "warned"),
    [
        ({}, False),
        ({"serving__instance_type": "ml.inf2.xlarge"}, True),
        ({LOCK: _GRAPHED_7B}, False),
        ({"serving__instance_type": "ml.inf2.8xlarge"}, False),
        # each case trains the 7B base its profile is built for (a profile that cannot serve it fails, not warns)
    ],
)
def test_warning_only_for_runtime_compile_of_7b_on_small_hosts(tmp_path, changes, warned):
    from stacks.config import load_config

    lock = changes.pop(LOCK, None)
    if changes or lock:
        changes["training__hyperparameters__model_id"] = LLAMA_2
        changes["training__neuron_compile__enabled"] = False  # compiled at start-up, where the warning applies
    content = _unserved(_with_all(**changes))
    write_case(tmp_path, {**content, LOCK: lock} if lock else content)
    config = load_config("dev", tmp_path)
    assert any("compiled_graph_prefix: null" in line for line in config.warnings()) is warned


@pytest.mark.parametrize(("env", "expected"), [("dev", ["discontinued"]), ("prod", ["discontinued"]), ("staging", [])])
def test_shipped_environments_warn_only_that_lmi_is_discontinued(env, expected):
    from stacks.config import load_config
    from tests.synth import ROOT

    warnings = load_config(env, ROOT / "config").warnings()
    assert [w for w in expected if any(w in line for line in warnings)] == expected and len(warnings) == len(expected)


def test_seed_settings_are_fine_on_the_seed_image(tmp_path):
    """batch_size 4 with rolling batch is only rejected from LMI 0.26; the seed ran 0.24.0."""
    from stacks.config import load_config

    write_case(
        tmp_path,
        _unserved(
            _with_all(serving__image_uri=f"{ECR}/djl-inference:0.24.0-neuronx-sdk2.14.1", serving__lmi__batch_size=4)
        ),
    )
    serving = load_config("dev", tmp_path).serving
    assert lmi.resolved_version(serving) == (0, 24, 0)
    assert "option.batch_size=4" in lmi.render_properties(serving)


# -- the committed serving.properties template is checked against the config ------------------------------

TEMPLATE = "engine=Python\noption.entryPoint=djl_python.transformers_neuronx\n" + "".join(
    f"option.{k}={{{{{k}}}}}\n"
    for k in (
        "tensor_parallel_degree",
        "n_positions",
        "rolling_batch",
        "max_rolling_batch_size",
        "batch_size",
        "dtype",
        "model_loading_timeout",
        "neuron_optimize_level",
        "context_length_estimate",
    )
)


@pytest.fixture
def template_dir(tmp_path, monkeypatch):
    """A folder whose serving.properties stands in for the backend's one template."""
    from stacks.config import serving_properties

    folder = tmp_path / "template"
    folder.mkdir()
    monkeypatch.setattr(serving_properties, "TEMPLATE", folder / "serving.properties")
    return folder


def _load(tmp_path, content=None):
    from stacks.config import load_config

    write_case(tmp_path / "config", content or VALID)
    return load_config("dev", tmp_path / "config")


@pytest.mark.parametrize(
    ("template", "expected"),
    [
        (
            TEMPLATE + "option.model_id=s3://bucket/models/x/\n",
            "option.model_id: remove this line; it comes from serving.model_prefix (OPTION_MODEL_ID)",
        ),
        (
            TEMPLATE + "option.compiled_graph_path=s3://b/neuron/\n",
            "option.compiled_graph_path: remove this line; it comes from serving.compiled_graph_prefix",
        ),
        (
            TEMPLATE.replace("{{tensor_parallel_degree}}", "8"),
            "option.tensor_parallel_degree: got '8' but serving.lmi.tensor_parallel_degree is '2'; "
            "write option.tensor_parallel_degree={{tensor_parallel_degree}}",
        ),
        (
            TEMPLATE.replace("option.n_positions={{n_positions}}\n", ""),
            "option.n_positions: missing; serving.lmi.n_positions is set: add option.n_positions={{n_positions}}",
        ),
        (
            TEMPLATE.replace("djl_python.transformers_neuronx", "djl_python.huggingface"),
            "option.entryPoint: got 'djl_python.huggingface'; the LMI NeuronX container needs",
        ),
        (TEMPLATE + "option.tensor_paralel_degree=2\n", "option.tensor_paralel_degree: unknown key"),
        (TEMPLATE + "option.quantize={{quantise}}\n", "line 12: unknown placeholder {{quantise}}"),
    ],
)
def test_template_drift_from_config_is_an_error(tmp_path, template_dir, template, expected):
    from stacks.config import ConfigError

    (template_dir / "serving.properties").write_text(template)
    with pytest.raises(ConfigError) as caught:
        _load(tmp_path)
    assert str(caught.value).startswith(f"{template_dir.as_posix()}/serving.properties: ")
    assert expected in str(caught.value)


def test_null_settings_drop_their_lines_and_lists_render_comma_separated(tmp_path, template_dir):
    (template_dir / "serving.properties").write_text("# comment {{kept}}\n" + TEMPLATE)
    content = _with_all(serving__lmi__context_length_estimate=[256, 512], serving__lmi__neuron_optimize_level=None)
    rendered = lmi.render_properties(_load(tmp_path, content).serving)
    assert rendered.splitlines()[0] == "# comment {{kept}}"
    assert "option.context_length_estimate=256,512" in rendered
    assert "neuron_optimize_level" not in rendered


@pytest.mark.parametrize(("image", "version"), [("lmi_neuronx", (0, 30, 0)), ("lmi_neuronx_0_29", (0, 29, 0))])
def test_lmi_version_comes_from_the_image_table(tmp_path, image, version):
    from stacks.config import load_config

    write_case(tmp_path, _unserved(_with("serving.image", image)))
    assert lmi.resolved_version(load_config("dev", tmp_path).serving) == version


@pytest.mark.parametrize(("case", "content", "expected"), CASES, ids=[c[0] for c in CASES])
def test_serving_rule_raises_the_same_line_in_process(tmp_path, case, content, expected):
    """load_config, what app.py runs first, raises the line the entry point prints (no process per case)."""
    from stacks.config import ConfigError, load_config

    write_case(tmp_path, content)
    with pytest.raises(ConfigError) as caught:
        load_config("dev", tmp_path)
    assert expected in str(caught.value) and "\n" not in str(caught.value)


def test_backends_are_listed_with_or_and_labelled(tmp_path):
    from stacks.config.serving import _or_list
    from stacks.serving.backends import backend

    assert (_or_list([]), _or_list(["a"]), _or_list(["a", "b"]), _or_list(["a", "b", "c"])) == (
        "",
        "a",
        "a or b",
        "a, b or c",
    )
    serving = _load(tmp_path).serving
    assert serving.backend_label == backend("lmi_neuronx").label and serving.spec is backend("lmi_neuronx")


def test_an_image_of_another_backend_names_the_backends_images(tmp_path):
    from stacks.config import ConfigError
    from stacks.serving.backends import backend

    with pytest.raises(ConfigError) as caught:
        _load(tmp_path, _with("serving.image", "vllm_neuronx"))
    images = ", ".join(backend("lmi_neuronx").images)
    assert str(caught.value).endswith(f"serving.image: got 'vllm_neuronx'; backend lmi_neuronx runs {images} (or null)")
    assert len(backend("lmi_neuronx").images) > 1


def test_the_model_location_comes_from_the_environment_only(tmp_path, template_dir):
    from stacks.config import ConfigError

    (template_dir / "serving.properties").write_text(TEMPLATE + "option.s3url=s3://bucket/models/x/\n")
    with pytest.raises(ConfigError) as caught:
        _load(tmp_path)
    assert str(caught.value).endswith(
        "option.s3url: remove this line; it comes from serving.model_prefix (OPTION_MODEL_ID) and would override it"
    )


@pytest.mark.parametrize("split", [True, False])
def test_switches_render_as_lmi_reads_them_and_its_extra_keys_ship(tmp_path, template_dir, split):
    """LMI's own keys the config has no setting for pass through from serving.lmi.extra_properties, after the
    template's lines, sorted; booleans are true/false."""
    extra = "option.enable_streaming=true\noption.revision=main\noption.trust_remote_code=false\n"
    (template_dir / "serving.properties").write_text(TEMPLATE + "option.load_split_model={{load_split_model}}\n")
    extras = {"option.trust_remote_code": False, "option.revision": "main", "option.enable_streaming": True}
    content = _with_all(serving__lmi__load_split_model=split, serving__lmi__extra_properties=extras)
    rendered = lmi.render_properties(_load(tmp_path, content).serving)
    assert f"option.load_split_model={'true' if split else 'false'}\n" in rendered and rendered.endswith(extra)


def test_serving_warnings_default_to_the_serving_section(tmp_path):
    from stacks.config.serving import ServingConfig

    serving = _load(tmp_path).serving
    assert serving.warnings() == serving.warnings("serving") and serving.warnings()[0].startswith("serving.backend: ")
    assert (ServingConfig.__module__, ServingConfig.__doc__) == (
        "stacks.config.serving",
        "One model on one ml.inf2 variant behind one backend's container (serving.backend).",
    )


def test_the_properties_reader_takes_javas_comments_and_refuses_the_rest():
    from stacks.config import ConfigError
    from stacks.config.serving_properties import parse

    assert parse("a=1\n! bang comment\n# hash comment\n\n  b = x=y  \n") == {"a": "1", "b": "x=y"}
    for text, line in (
        ("a=1\nbroken\n", "serving.properties: line 2: got 'broken'; expected key=value"),
        ("a=1\na=2\n", "serving.properties: a: set twice"),
    ):
        with pytest.raises(ConfigError) as caught:
            parse(text)
        assert str(caught.value) == line


def test_template_mistakes_name_what_is_known(tmp_path, template_dir):
    import dataclasses

    from stacks.config import ConfigError
    from stacks.serving.backends.lmi_neuronx.config import LmiOptions

    options = sorted(f.name for f in dataclasses.fields(LmiOptions) if f.name != "extra_properties")
    known = sorted({"engine", "option.entryPoint", *(f"option.{name}" for name in options)})
    for template, line in (
        (
            "! kept {{x}}\n" + TEMPLATE + "option.dtype={{dtyp}}\n",
            f"line 13: unknown placeholder {{{{dtyp}}}}; known: {', '.join(options)}",
        ),
        (TEMPLATE + "option.typo=1\n", f"option.typo: unknown key; known: {', '.join(known)}"),
        (
            TEMPLATE.replace("{{neuron_optimize_level}}", "2"),
            "option.neuron_optimize_level: got '2' but serving.lmi.neuron_optimize_level is null; write "
            "option.neuron_optimize_level={{neuron_optimize_level}}",
        ),
    ):
        (template_dir / "serving.properties").write_text(template)
        with pytest.raises(ConfigError) as caught:
            _load(tmp_path, _with("serving.lmi.neuron_optimize_level", None))
        assert str(caught.value).endswith(line), str(caught.value)
