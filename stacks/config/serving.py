"""The serving section: which model an environment serves on ml.inf2, with which backend, and how.

Promoting a model is one line: `serving.model_prefix`; while it is null (a new account's empty bucket)
the environment has no Serving stack, so a first deploy creates no endpoint with nothing to load. Every
cross-field rule of the LMI NeuronX and the vLLM Neuron container is checked here, before any CDK code
runs, with one-line errors.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal, NamedTuple

from ..image_table import image_uris
from . import serving_properties
from .endpoint import AlarmConfig, AutoscalingConfig, DataCaptureConfig, RolloutConfig, check_variant
from .errors import ConfigError
from .schema import setting
from .serving_backends import (
    ACCELERATOR_MEMORY_GB,
    ARCHITECTURES,
    HBM_GB_PER_CORE,
    IMAGES,
    LABELS,
    LMI_DISCONTINUED,
    WEIGHT_SHARE_OF_HBM,
    Backend,
    NeuronOptions,
    weights_gb,
)

S3_PREFIX = r"([A-Za-z0-9!_.*'()=-]+/)+"
ECR_IMAGE = r"\d{12}\.dkr\.ecr\.[a-z0-9-]+\.amazonaws\.com(\.cn)?/[a-z0-9._/-]+:[\w.-]+"
_LMI_TAG = re.compile(r"djl-inference:(\d+)\.(\d+)\.(\d+)-neuronx")
ROLLING_BATCH_WITH_BATCH_SIZE_FAILS_FROM = (0, 26, 0)
SEVEN_B_CLASS = 6.0  # billions of parameters from which a runtime Neuron compile needs ~100 GB host RAM
SMALL_HOST_GB = 16


class Inf2Type(NamedTuple):
    neuron_cores: int
    host_memory_gb: int
    vcpus: int


INF2_TYPES: dict[str, Inf2Type] = {
    "ml.inf2.xlarge": Inf2Type(2, 16, 4),
    "ml.inf2.8xlarge": Inf2Type(2, 128, 32),
    "ml.inf2.24xlarge": Inf2Type(12, 384, 96),
    "ml.inf2.48xlarge": Inf2Type(24, 768, 192),
}


def lmi_version_of(uri: str) -> tuple[int, int, int] | None:
    match = _LMI_TAG.search(uri)
    return tuple(int(g) for g in match.groups()) if match else None


def _version_text(version: tuple[int, ...]) -> str:
    return ".".join(str(v) for v in version)


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


@dataclass(frozen=True)
class ServingConfig:
    """One model on one ml.inf2 variant behind the LMI NeuronX or the vLLM Neuron container."""

    model_name: str = setting(
        pattern=r"[a-z0-9][a-z0-9._-]{0,62}",
        hint="lmi_neuronx: a folder under serving_artifacts/; vllm_neuronx: the served model name",
    )
    model_architecture: str = setting(pattern=r"[a-z0-9_]{1,32}", hint="model_type in the model's config.json")
    model_parameters_billions: float = setting(ge=0.01, le=1000)
    model_context_length: int = setting(ge=128, le=1048576, hint="max_position_embeddings of the model")
    model_prefix: str | None = setting(
        None,
        pattern=S3_PREFIX,
        hint="the model's prefix in the artifact bucket, ending in '/' (vllm_neuronx: the compiled model); null: "
        "nothing to serve yet, no Serving stack",
    )
    backend: Backend = setting("lmi_neuronx", hint="lmi_neuronx (discontinued) or vllm_neuronx")
    compiled_graph_prefix: str | None = setting(
        None, pattern=S3_PREFIX, hint="precompiled Neuron artifacts in the artifact bucket; skips the runtime compile"
    )
    image: Literal["lmi_neuronx", "lmi_neuronx_0_29", "vllm_neuronx"] | None = setting(
        None, hint="stacks/images.json; null: the backend's image"
    )
    image_uri: str | None = setting(None, pattern=ECR_IMAGE, hint="overrides the region table")
    lmi_version: str | None = setting(None, pattern=r"\d+\.\d+\.\d+", hint="needed when image_uri's tag hides it")
    instance_type: str = setting("ml.inf2.xlarge", pattern=r"ml\.[a-z0-9-]+\.[a-z0-9]+")
    initial_instance_count: int = setting(1, ge=1, le=100)
    volume_size_gb: int = setting(64, ge=4, le=512)
    container_startup_health_check_timeout_seconds: int = setting(1800, ge=60, le=3600)
    model_data_download_timeout_seconds: int = setting(600, ge=60, le=3600)
    lmi: LmiOptions = setting(LmiOptions(), hint="lmi_neuronx only")
    neuron: NeuronOptions = setting(NeuronOptions(), hint="vllm_neuronx only: the compiled and served shape")
    rollout: RolloutConfig = setting(RolloutConfig())
    autoscaling: AutoscalingConfig = setting(AutoscalingConfig())
    alarms: AlarmConfig = setting(AlarmConfig())
    data_capture: DataCaptureConfig = setting(DataCaptureConfig())

    @property
    def inf2(self) -> Inf2Type:
        return INF2_TYPES[self.instance_type]

    @property
    def image_name(self) -> str:
        """The stacks/images.json entry: the configured one or the backend's default."""
        return self.image or IMAGES[self.backend][0]

    @property
    def backend_label(self) -> str:
        return LABELS[self.backend]

    def resolved_lmi_version(self) -> tuple[int, int, int] | None:
        if self.lmi_version is not None:
            return tuple(int(p) for p in self.lmi_version.split("."))
        if self.image_uri is not None:
            return lmi_version_of(self.image_uri)
        versions = {lmi_version_of(uri) for uri in image_uris(self.image_name)}
        return versions.pop() if len(versions) == 1 else None

    def render_properties(self, source: str = "", path: str = "serving") -> str:
        return serving_properties.render(self.model_name, self.lmi, source=source, path=path)

    def check(self, source: str, path: str) -> None:
        if self.instance_type not in INF2_TYPES:
            raise ConfigError(
                source,
                f"{path}.instance_type",
                f"got {self.instance_type!r}; the {self.backend_label} container needs an Inferentia2 type: "
                + ", ".join(INF2_TYPES),
            )
        known = ARCHITECTURES[self.backend]
        if self.model_architecture not in known:
            other = [b for b, names in ARCHITECTURES.items() if self.model_architecture in names and b != self.backend]
            fix = f"; backend {other[0]} serves it" if other else ""
            raise ConfigError(
                source,
                f"{path}.model_architecture",
                f"got {self.model_architecture!r}; backend {self.backend} supports {', '.join(known)}{fix}",
            )
        if self.image_name not in IMAGES[self.backend]:
            raise ConfigError(
                source,
                f"{path}.image",
                f"got {self.image!r}; backend {self.backend} runs {', '.join(IMAGES[self.backend])} (or null)",
            )
        unused = ("neuron", NeuronOptions()) if self.backend == "lmi_neuronx" else ("lmi", LmiOptions())
        if getattr(self, unused[0]) != unused[1]:
            other = "vllm_neuronx" if self.backend == "lmi_neuronx" else "lmi_neuronx"
            raise ConfigError(
                source,
                f"{path}.{unused[0]}",
                f"only for backend {other}; backend is {self.backend}: remove the section",
            )
        if self.model_prefix is None and self.compiled_graph_prefix is not None:
            raise ConfigError(
                source,
                f"{path}.compiled_graph_prefix",
                "set while model_prefix is null (nothing served yet): set it to null, or set model_prefix too",
            )
        if self.backend == "lmi_neuronx":
            self._check_lmi(source, path)
        else:
            self._check_vllm(source, path)
        check_variant(self, source, path)

    def _check_lmi(self, source: str, path: str) -> None:
        lmi = self.lmi
        cores = self.inf2.neuron_cores
        if lmi.tensor_parallel_degree > cores:
            fits = ", ".join(
                f"{n} ({t.neuron_cores})" for n, t in INF2_TYPES.items() if t.neuron_cores >= lmi.tensor_parallel_degree
            )
            raise ConfigError(
                source,
                f"{path}.lmi.tensor_parallel_degree",
                f"got {lmi.tensor_parallel_degree}; {self.instance_type} has {cores} NeuronCores: use <= {cores} "
                f"or a type with enough cores: {fits}",
            )
        self._check_version(source, path)
        if lmi.n_positions > self.model_context_length:
            raise ConfigError(
                source,
                f"{path}.lmi.n_positions",
                f"got {lmi.n_positions}; exceeds the model's context ({path}.model_context_length = "
                f"{self.model_context_length})",
            )
        if lmi.rolling_batch == "disable" and lmi.max_rolling_batch_size is not None:
            raise ConfigError(
                source,
                f"{path}.lmi.max_rolling_batch_size",
                f"got {lmi.max_rolling_batch_size} with rolling_batch 'disable'; "
                "set it to null or enable rolling batch",
            )
        if self.container_startup_health_check_timeout_seconds < lmi.model_loading_timeout:
            raise ConfigError(
                source,
                f"{path}.container_startup_health_check_timeout_seconds",
                f"got {self.container_startup_health_check_timeout_seconds}; must be >= lmi.model_loading_timeout "
                f"({lmi.model_loading_timeout}) or SageMaker kills the container while the model still loads",
            )
        self.render_properties(source, path)

    def _check_vllm(self, source: str, path: str) -> None:
        neuron = self.neuron
        cores = self.inf2.neuron_cores
        tp = neuron.tensor_parallel_size
        if tp > cores:
            raise ConfigError(
                source,
                f"{path}.neuron.tensor_parallel_size",
                f"got {tp}; {self.instance_type} has {cores} NeuronCores and serve needs NeuronCores >= the TP "
                f"degree: use <= {cores} or a larger inf2 type",
            )
        if neuron.sequence_length > self.model_context_length:
            raise ConfigError(
                source,
                f"{path}.neuron.sequence_length",
                f"got {neuron.sequence_length}; exceeds the model's context ({path}.model_context_length = "
                f"{self.model_context_length})",
            )
        budget = WEIGHT_SHARE_OF_HBM * tp * HBM_GB_PER_CORE
        if weights_gb(self.model_parameters_billions) > budget:
            raise ConfigError(
                source,
                f"{path}.neuron.tensor_parallel_size",
                f"got {tp}; {weights_gb(self.model_parameters_billions):g} GB of 16-bit weights exceed "
                f"{WEIGHT_SHARE_OF_HBM:.0%} of {tp} x {HBM_GB_PER_CORE} GB NeuronCore memory (the rest is KV cache "
                f"for batch {neuron.batch_size} x {neuron.sequence_length} tokens): raise it (instance memory "
                f"{ACCELERATOR_MEMORY_GB[self.instance_type]} GB)",
            )
        if self.model_prefix is not None and f"/{neuron.compiled_folder}" not in f"/{self.model_prefix}":
            raise ConfigError(
                source,
                f"{path}.model_prefix",
                f"got {self.model_prefix!r}; vllm_neuronx serves a compiled model whose prefix names its shape: it "
                f"must contain {neuron.compiled_folder} (serving.neuron), as the Training workflow's compile step "
                "writes it",
            )
        if self.compiled_graph_prefix is not None:
            raise ConfigError(
                source,
                f"{path}.compiled_graph_prefix",
                "only for backend lmi_neuronx; vllm_neuronx serves the compiled model at model_prefix: remove it",
            )
        if self.lmi_version is not None:
            raise ConfigError(source, f"{path}.lmi_version", "only for backend lmi_neuronx: remove it")
        needed = 2 * weights_gb(self.model_parameters_billions) + 10
        if self.volume_size_gb < needed:
            raise ConfigError(
                source,
                f"{path}.volume_size_gb",
                f"got {self.volume_size_gb}; the compiled model is mounted from S3 onto the volume: needs >= "
                f"{needed:g} GB (2 x {weights_gb(self.model_parameters_billions):g} GB weights + 10)",
            )

    def _check_version(self, source: str, path: str) -> None:
        version = self.resolved_lmi_version()
        if version is None:
            raise ConfigError(
                source,
                f"{path}.lmi_version",
                "cannot tell the LMI version from image_uri's tag; state it, e.g. lmi_version: 0.30.0",
            )
        if self.image_uri is not None and self.lmi_version is not None:
            tagged = lmi_version_of(self.image_uri)
            if tagged is not None and tagged != version:
                raise ConfigError(
                    source,
                    f"{path}.lmi_version",
                    f"got {self.lmi_version}; image_uri's tag says {_version_text(tagged)}",
                )
        lmi = self.lmi
        rolling = lmi.rolling_batch != "disable"
        if lmi.batch_size > 1 and rolling and version >= ROLLING_BATCH_WITH_BATCH_SIZE_FAILS_FROM:
            raise ConfigError(
                source,
                f"{path}.lmi.batch_size",
                f"got {lmi.batch_size} with rolling_batch {lmi.rolling_batch!r}; LMI {_version_text(version)} "
                "(>= 0.26) fails with 'Dynamic batching and rolling batch cannot be enabled at the same time': "
                "use batch_size 1 and max_rolling_batch_size, or rolling_batch: disable",
            )

    def warnings(self, path: str = "serving") -> list[str]:
        """Risky but legal settings, as `field: problem` lines."""
        if self.backend != "lmi_neuronx":
            return []
        found = [f"{path}.backend: lmi_neuronx: {LMI_DISCONTINUED}"]
        if (
            self.model_parameters_billions >= SEVEN_B_CLASS
            and self.compiled_graph_prefix is None
            and self.inf2.host_memory_gb <= SMALL_HOST_GB
        ):
            found.append(
                f"{path}.compiled_graph_prefix: null, so the {self.model_parameters_billions:g}B-parameter model is "
                f"compiled at startup on {self.instance_type} ({self.inf2.host_memory_gb} GB host RAM); a 7B-class "
                "compile needs ~100 GB and will fail: set compiled_graph_prefix or use ml.inf2.8xlarge or larger"
            )
        return found
