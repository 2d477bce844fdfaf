"""What the LMI NeuronX backend accepts: serving.lmi (serving.properties `option.*` keys) and its rules.

LMI NeuronX (djl-inference 0.30.0-neuronx, the last one: djl-serving dropped Neuron in Nov 2025) loads
transformers-neuronx models from the pinned prefix, with serving.properties shipped as a tarball: the backend's
one template (serving.properties beside this file) rendered from serving.lmi, whatever the model.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from stacks.config import serving_properties
from stacks.config.errors import ConfigError
from stacks.config.inf2 import INF2_TYPES
from stacks.config.schema import setting
from stacks.config.trn1 import COMPILE_HOST_GB_PER_BILLION, INF2_TP_DEGREES, TRN1_TP_DEGREES, TRN1_TYPES
from stacks.image_table import image_uris

if TYPE_CHECKING:
    from stacks.config.serving import ServingConfig

LMI_DISCONTINUED = (
    "the LMI NeuronX container is discontinued (djl-serving dropped Neuron in Nov 2025, PR #2939; the last image is "
    "djl-inference:0.30.0-neuronx-sdk2.20.1 and it loads no qwen2/qwen3): the maintained alternative is "
    "backend: vllm_neuronx (Hugging Face vLLM Neuron)"
)
_LMI_TAG = re.compile(r"djl-inference:(\d+)\.(\d+)\.(\d+)-neuronx")
ROLLING_BATCH_WITH_BATCH_SIZE_FAILS_FROM = (0, 26, 0)
SEVEN_B_CLASS = 6.0  # billions of parameters from which a runtime Neuron compile needs ~100 GB host RAM
SMALL_HOST_GB = 16


@dataclass(frozen=True)
class LmiOptions:
    """`option.*` keys of serving.properties; null leaves the key out (LMI's default applies)."""

    tensor_parallel_degree: int = setting(2, ge=1, le=24, hint="NeuronCores per model copy")
    n_positions: int = setting(2048, ge=128, le=32768, hint="input + output tokens")
    rolling_batch: Literal["auto", "tnx", "vllm", "disable"] = setting("auto")
    max_rolling_batch_size: int | None = setting(4, ge=1, le=256)
    batch_size: int = setting(1, ge=1, le=256, hint="static batch; must be 1 with rolling batch on LMI >= 0.26")
    dtype: Literal["fp32", "fp16", "bf16"] = setting("fp16")
    model_loading_timeout: int = setting(1500, ge=60, le=3600, hint="seconds")
    neuron_optimize_level: int | None = setting(2, ge=1, le=3)
    context_length_estimate: list[int] | None = setting(None)
    load_split_model: bool | None = setting(None)
    quantize: Literal["static_int8"] | None = setting(None)
    group_query_attention: Literal["shard-over-heads", "shard-over-batch", "replicated-heads"] | None = setting(None)
    output_formatter: Literal["json", "jsonlines", "sse"] | None = setting(None)
    # A documented LMI key the settings above do not cover, for the model that needs it (checked in `check`).
    extra_properties: dict[str, str | bool | int] = setting(
        {},
        hint="documented LMI NeuronX 0.30 keys without a setting above (option.<key>: a string, true/false or an "
        "integer), after the template's lines; docs/serving.md lists them",
    )

    def check(self, source: str, path: str) -> None:
        """Extra keys are checked as the section is read, so a bad one fails naming config/<env>.yaml."""
        serving_properties.check_extras(
            self.extra_properties, serving_properties.typed_values(self), source=source, path=path
        )


def lmi_version_of(uri: str) -> tuple[int, int, int] | None:
    match = _LMI_TAG.search(uri)
    return tuple(int(g) for g in match.groups()) if match else None


def _version_text(version: tuple[int, ...]) -> str:
    return ".".join(str(v) for v in version)


def resolved_version(serving: ServingConfig) -> tuple[int, int, int] | None:
    """The LMI version: stated, else from image_uri's tag, else from the image table's one tag."""
    if serving.lmi_version is not None:
        return tuple(int(p) for p in serving.lmi_version.split("."))
    if serving.image_uri is not None:
        return lmi_version_of(serving.image_uri)
    versions = {lmi_version_of(uri) for uri in image_uris(serving.image_name)}
    return versions.pop() if len(versions) == 1 else None


def render_properties(serving: ServingConfig, source: str = "", path: str = "serving") -> str:
    return serving_properties.render(serving.lmi, source=source, path=f"{path}.lmi")


def check(serving: ServingConfig, source: str, path: str) -> None:
    """TP against the cores, the version's batch rule, rolling batch, the start-up timeout (the model's own facts:
    stacks/config/served_model.py)."""
    lmi = serving.lmi
    cores = serving.inf2.neuron_cores
    if lmi.tensor_parallel_degree > cores:
        fits = ", ".join(
            f"{n} ({t.neuron_cores})" for n, t in INF2_TYPES.items() if t.neuron_cores >= lmi.tensor_parallel_degree
        )
        raise ConfigError(
            source,
            f"{path}.lmi.tensor_parallel_degree",
            f"got {lmi.tensor_parallel_degree}; {serving.instance_type} has {cores} NeuronCores: use <= {cores} "
            f"or a type with enough cores: {fits}",
        )
    _check_version(serving, source, path)
    if lmi.rolling_batch == "disable" and lmi.max_rolling_batch_size is not None:
        raise ConfigError(
            source,
            f"{path}.lmi.max_rolling_batch_size",
            f"got {lmi.max_rolling_batch_size} with rolling_batch 'disable'; set it to null or enable rolling batch",
        )
    timeout = serving.container_startup_health_check_timeout_seconds
    if timeout < lmi.model_loading_timeout:
        raise ConfigError(
            source,
            f"{path}.container_startup_health_check_timeout_seconds",
            f"got {timeout}; must be >= lmi.model_loading_timeout "
            f"({lmi.model_loading_timeout}) or SageMaker kills the container while the model still loads",
        )
    render_properties(serving, source, path)


def _check_version(serving: ServingConfig, source: str, path: str) -> None:
    version = resolved_version(serving)
    if version is None:
        raise ConfigError(
            source,
            f"{path}.lmi_version",
            "cannot tell the LMI version from image_uri's tag; state it, e.g. lmi_version: 0.30.0",
        )
    if serving.image_uri is not None and serving.lmi_version is not None:
        tagged = lmi_version_of(serving.image_uri)
        if tagged is not None and tagged != version:
            raise ConfigError(
                source,
                f"{path}.lmi_version",
                f"got {serving.lmi_version}; image_uri's tag says {_version_text(tagged)}",
            )
    lmi = serving.lmi
    rolling = lmi.rolling_batch != "disable"
    if lmi.batch_size > 1 and rolling and version >= ROLLING_BATCH_WITH_BATCH_SIZE_FAILS_FROM:
        raise ConfigError(
            source,
            f"{path}.lmi.batch_size",
            f"got {lmi.batch_size} with rolling_batch {lmi.rolling_batch!r}; LMI {_version_text(version)} "
            "(>= 0.26) fails with 'Dynamic batching and rolling batch cannot be enabled at the same time': "
            "use batch_size 1 and max_rolling_batch_size, or rolling_batch: disable",
        )


def warnings(serving: ServingConfig, path: str) -> list[str]:
    """The discontinuation notice, and a 7B-class runtime compile on a small host."""
    found = [f"{path}.backend: lmi_neuronx: {LMI_DISCONTINUED}"]
    if (
        serving.model_parameters_billions >= SEVEN_B_CLASS
        and serving.compiled_graph_prefix is None
        and serving.model_prefix is None  # a promoted version's fit is checked with its own compiled model
        and serving.inf2.host_memory_gb <= SMALL_HOST_GB
    ):
        found.append(
            f"{path}.compiled_graph_prefix: null, so the {serving.model_parameters_billions:.2f}B-parameter model is "
            f"compiled at startup on {serving.instance_type} ({serving.inf2.host_memory_gb} GB host RAM); a 7B-class "
            "compile needs ~100 GB and will fail: set compiled_graph_prefix or use ml.inf2.8xlarge or larger"
        )
    return found


def served_positions(serving: ServingConfig) -> tuple[str, int]:
    return "serving.lmi.n_positions", serving.lmi.n_positions


def tensor_parallel(serving: ServingConfig) -> tuple[str, int]:
    return "serving.lmi.tensor_parallel_degree", serving.lmi.tensor_parallel_degree


# neuronx-cc each LMI NeuronX image pins (djl-serving <version>-dlc serving/docker/pytorch-inf2.Dockerfile,
# ARG neuronx_cc_version): a compiled model loads only in a container of the same compiler version
# (serving/docs/lmi/deployment_guide/model-artifacts.md).
NEURONX_CC = {(0, 30, 0): "2.15.141.0", (0, 29, 0): "2.14.227.0"}
# transformers-neuronx records the dtype as its `amp` name (djl_python tnx_properties.py, Dtype member names)
AMP_OF_DTYPE = {"fp32": "f32", "fp16": "f16", "bf16": "bf16"}


def compiler_version(serving: ServingConfig) -> str:
    """The neuronx-cc of the serving image (ConfigError-free: the version check ran before)."""
    version = resolved_version(serving)
    if version not in NEURONX_CC:
        known = ", ".join(_version_text(v) for v in NEURONX_CC)
        raise ConfigError(
            "stacks/serving/backends/lmi_neuronx/config.py",
            "NEURONX_CC",
            f"no neuronx-cc version recorded for LMI {_version_text(version)} (known: {known}): add the image's "
            "ARG neuronx_cc_version from its djl-serving branch",
        )
    return NEURONX_CC[version]


def compiled_batch(serving: ServingConfig) -> int:
    """The batch a compiled model has: max_rolling_batch_size with rolling batch (DJL sets batch_size to it for
    precompiled models, djl_python/transformers_neuronx.py set_configs), else batch_size."""
    lmi = serving.lmi
    return lmi.max_rolling_batch_size if lmi.rolling_batch != "disable" else lmi.batch_size


def compiled_shape(serving: ServingConfig) -> dict[str, Any]:
    """The shape the served model is compiled for, as the lock's `compiled` section names it."""
    lmi = serving.lmi
    return {
        "tensor_parallel_degree": lmi.tensor_parallel_degree,
        "n_positions": lmi.n_positions,
        "batch_size": compiled_batch(serving),
        "dtype": lmi.dtype,
    }


def compiled_folder(serving: ServingConfig) -> str:
    """The folder the compile step writes a model of this shape and compiler into (its prefix names both)."""
    shape = compiled_shape(serving)
    return (
        f"neuron/tp{shape['tensor_parallel_degree']}-np{shape['n_positions']}-bs{shape['batch_size']}-"
        f"{shape['dtype']}-neuronx-cc-{compiler_version(serving)}/"
    )


def compile_memory_problem(serving: ServingConfig, billions: float, compiled: bool) -> str | None:
    """A served 7B-class model compiled at start-up on a small host fails (the warning, on the true size)."""
    host = serving.inf2.host_memory_gb
    if billions < SEVEN_B_CLASS or compiled or host > SMALL_HOST_GB:
        return None
    return (
        f"a {billions:.2f}B-parameter model without a precompiled graph is compiled at start-up, which needs ~100 GB "
        f"host RAM; {serving.instance_type} has {host} GB: serve it on ml.inf2.8xlarge or larger"
    )


COMPILE_TYPE = "training.neuron_compile.instance_type"
# The TP degrees a model partitioned on Trn1 for Inf2 can have: both runtimes run them.
PARTITION_TP_DEGREES = tuple(d for d in TRN1_TP_DEGREES if d in INF2_TP_DEGREES)


def _listed(degrees: tuple[int, ...] | list[int]) -> str:
    return ", ".join(map(str, degrees))


def compile_problem(serving: ServingConfig, chosen: str) -> tuple[str, str] | None:
    """(field, problem) when the compile step's instance cannot partition this profile's model (not a Trainium
    type, fewer NeuronCores than the TP degree, a TP degree Trn1 does not run, too little host memory), or the
    endpoint that serves the compiled model scales out faster than an instance loads it."""
    tp, billions = serving.lmi.tensor_parallel_degree, serving.model_parameters_billions
    need = COMPILE_HOST_GB_PER_BILLION * billions
    fits = [n for n, t in TRN1_TYPES.items() if t.neuron_cores >= tp and t.host_memory_gb >= need]
    use = f"use {' or '.join(fits)}" if fits else "no ml.trn1 type fits: serve a smaller model"
    host = TRN1_TYPES.get(chosen)
    if host is None:
        return COMPILE_TYPE, (
            f"got {chosen!r}; LMI NeuronX's partition loads the model onto NeuronCores (DJL 0.30 calls to_neuron; "
            "CPU-only compiling needs Neuron SDK 2.21, the image has 2.20.1) and SageMaker training has them on "
            f"ml.trn1 (NeuronCore-v2, as ml.inf2): {use}"
        )
    if tp not in TRN1_TP_DEGREES:
        return "serving.lmi.tensor_parallel_degree", (
            f"got {tp}; the partition runs on Trn1, whose Neuron runtime runs TP {_listed(TRN1_TP_DEGREES)} "
            f"(Inf2: {_listed(INF2_TP_DEGREES)}): use {_listed(PARTITION_TP_DEGREES)}, or set "
            "training.neuron_compile.enabled: false to compile at start-up"
        )
    if host.neuron_cores < tp:
        return COMPILE_TYPE, (
            f"got {chosen!r} ({host.neuron_cores} NeuronCores); the partition loads serving.lmi.tensor_parallel_degree "
            f"{tp} shards, one per NeuronCore: {use}"
        )
    cooldown, loading = serving.autoscaling.scale_out_cooldown_seconds, serving.lmi.model_loading_timeout
    if cooldown < loading:
        return "serving.autoscaling.scale_out_cooldown_seconds", (
            f"got {cooldown}; a new instance loads the compiled model for up to serving.lmi.model_loading_timeout "
            f"({loading} s) before it takes traffic, and a shorter cooldown adds more instances on the same load: "
            f"use >= {loading}"
        )
    if host.host_memory_gb < need:
        return COMPILE_TYPE, (
            f"got {chosen!r} ({host.host_memory_gb} GiB host RAM); compiling the {billions:.2f}B-parameter "
            f"{serving.base_model} needs ~{need:.0f} GiB ({COMPILE_HOST_GB_PER_BILLION} GiB per billion "
            f"parameters, ~100 GB for a 7B model): {use}"
        )
    return None
