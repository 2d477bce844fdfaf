"""The serving profile against a model's own facts: a promoted version's (the lock) or a training base's.

Each rule fails with one ConfigError line that names the model (the version's ARN, or the training base), the
field, the model's value, the environment's, and the fix. The same rules run at synth (config/<env>.model.json
against config/<env>.yaml), in the promotion (before anything is copied) and on the training base
(trained_model.py), so what one accepts the others accept.

Parameter tolerance: a model's true parameter count may differ from the training base's (its record in
config/models/, the size the profile is built for) by at most PARAMETER_TOLERANCE_SHARE of it, or
PARAMETER_TOLERANCE_FLOOR_BILLIONS, whichever is larger (the floor covers the emulator's tiny models).
"""

from __future__ import annotations

import copy
import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from ..image_table import image_uris
from ..serving.backends import backends
from ..serving.backends.vllm_neuronx.config import BYTES_PER_PARAMETER, HBM_GB_PER_CORE, WEIGHT_SHARE_OF_HBM
from .errors import ConfigError
from .model_lock import ModelLock

if TYPE_CHECKING:
    from .app_config import AppConfig
    from .serving import ServingConfig

PARAMETER_TOLERANCE_SHARE = 0.10
PARAMETER_TOLERANCE_FLOOR_BILLIONS = 0.05
APPROVED = "Approved"


@dataclass(frozen=True)
class ModelShape:
    """The facts the profile is checked against; `parameters` None: not known (the project's tiny models)."""

    model_type: str
    architecture: str
    parameters: int | None
    context_length: int
    num_attention_heads: int
    num_key_value_heads: int


@dataclass(frozen=True)
class Subject:
    """Whose facts: `name` in messages, `source` the file an error names, `fields` each fact's field there."""

    name: str
    source: str
    fields: dict[str, str]


def parameter_tolerance_billions(profile_billions: float) -> float:
    return max(PARAMETER_TOLERANCE_SHARE * profile_billions, PARAMETER_TOLERANCE_FLOOR_BILLIONS)


def _env_field(config_source: str, field: str) -> str:
    return f"{config_source} {field}"


def check_shape(serving: ServingConfig, shape: ModelShape, subject: Subject, config_source: str) -> None:
    """Architecture, size, context, heads and memory of `shape` against the serving profile."""
    spec = serving.spec
    where = subject.fields

    def refuse(fact: str, problem: str) -> None:
        raise ConfigError(subject.source, where[fact], f"{subject.name}: {problem}")

    if shape.model_type not in spec.architectures:
        other = [b.name for b in backends().values() if shape.model_type in b.architectures and b != spec]
        fix = f"serve it with backend {other[0]}" if other else "promote a model of one of those architectures"
        refuse(
            "model_type",
            f"model_type {shape.model_type} ({shape.architecture}); {_env_field(config_source, 'serving.backend')} "
            f"{spec.name} loads {', '.join(spec.architectures)}: {fix}",
        )
    if shape.parameters is not None:
        billions = shape.parameters / 1e9
        profile = serving.model_parameters_billions
        tolerance = parameter_tolerance_billions(profile)
        if abs(billions - profile) > tolerance:
            refuse(
                "parameters",
                f"{shape.parameters} parameters ({billions:.2f} B); {config_source} trains and serves "
                f"{serving.base_model}, {profile:.2f} B (tolerance {tolerance:.2f} B): promote a version "
                "of that base, or make the environment's training base the one this version was trained from",
            )
    _check_positions(serving, shape, refuse, config_source)
    _check_heads(serving, shape, refuse, config_source)


def _check_positions(serving: ServingConfig, shape: ModelShape, refuse, config_source: str) -> None:
    spec = serving.spec
    served = spec.served_positions(serving)
    if served is None:
        return
    field, positions = served
    if positions > shape.context_length:
        refuse(
            "context_length",
            f"context_length {shape.context_length} (max_position_embeddings); "
            f"{_env_field(config_source, field)} is {positions}: serve at most {shape.context_length} positions "
            "or a model with a longer context",
        )


def _check_heads(serving: ServingConfig, shape: ModelShape, refuse, config_source: str) -> None:
    spec = serving.spec
    sharding = spec.tensor_parallel(serving)
    if sharding is None:
        return
    field, tp = sharding
    cores = serving.inf2.neuron_cores
    heads, kv = shape.num_attention_heads, shape.num_key_value_heads
    if heads % tp:
        fits = [d for d in range(1, cores + 1) if heads % d == 0]
        refuse(
            "num_attention_heads",
            f"{heads} attention heads; {_env_field(config_source, field)} is {tp}, which does not divide them: "
            f"use one of {', '.join(map(str, fits))} ({serving.instance_type} has {cores} NeuronCores)",
        )
    if spec.shards_kv_heads and kv % tp and tp % kv:
        refuse(
            "num_key_value_heads",
            f"{kv} key/value heads; {_env_field(config_source, field)} is {tp}: {spec.label} shards K/V heads only "
            "when one of the two divides the other (else it replicates them per query head): use a TP degree that "
            f"divides {kv} or a multiple of it",
        )


def check_memory(
    serving: ServingConfig, shape: ModelShape, subject: Subject, config_source: str, *, compiled: bool | None
) -> None:
    """The 16-bit weights in the TP group's NeuronCore memory, and the backend's own rule (whether the version
    brings a compiled graph; None: not known yet, a training base), on the true size."""
    sharding = serving.spec.tensor_parallel(serving)
    if shape.parameters is None or sharding is None:
        return
    billions = shape.parameters / 1e9
    field, tp = sharding
    weights = billions * BYTES_PER_PARAMETER
    budget = WEIGHT_SHARE_OF_HBM * tp * HBM_GB_PER_CORE
    problem = None
    if weights > budget:
        problem = (
            f"{weights:.1f} GB of 16-bit weights exceed {WEIGHT_SHARE_OF_HBM:.0%} of {tp} x {HBM_GB_PER_CORE} GB "
            f"NeuronCore memory ({_env_field(config_source, field)} {tp}): raise the TP degree"
        )
    if problem is None and compiled is not None:
        problem = serving.spec.memory_problem(serving, billions, compiled)
    if problem:
        raise ConfigError(
            subject.source,
            subject.fields["parameters"],
            f"{subject.name}: {shape.parameters} parameters on {serving.instance_type} "
            f"({_env_field(config_source, 'serving.instance_type')}): {problem}",
        )


LOCK_FIELDS = {
    "model_type": "facts.model_type",
    "parameters": "facts.parameters",
    "context_length": "facts.context_length",
    "num_attention_heads": "facts.num_attention_heads",
    "num_key_value_heads": "facts.num_key_value_heads",
}


def lock_shape(lock: ModelLock) -> ModelShape:
    facts = lock.facts
    return ModelShape(
        model_type=facts.model_type,
        architecture=facts.architecture,
        parameters=facts.parameters,
        context_length=facts.context_length,
        num_attention_heads=facts.num_attention_heads,
        num_key_value_heads=facts.num_key_value_heads,
    )


def check_lock(config: AppConfig, lock: ModelLock, lock_source: str) -> None:
    """Every rule a served version must pass in `config`'s environment (ConfigError naming the lock file)."""
    serving, env = config.serving, config.source
    version = lock.version
    if serving is None:
        raise ConfigError(lock_source, "model_package_arn", f"{version}: {env} has no serving section to serve it")
    if lock.approval_status != APPROVED:
        raise ConfigError(
            lock_source,
            "approval_status",
            f"{version} is {lock.approval_status}; only an Approved version is served: approve it in the model "
            "registry (a person's decision), then promote it again",
        )
    pin = lock.serving
    if pin.backend != serving.backend:
        raise ConfigError(
            lock_source,
            "serving.backend",
            f"{version} was registered for backend {pin.backend}; {env} serving.backend is {serving.backend}: "
            f"promote a version registered for {serving.backend}",
        )
    allowed = (serving.image_uri,) if serving.image_uri else image_uris(serving.image_name)
    if pin.image not in allowed:
        raise ConfigError(
            lock_source,
            "serving.image",
            f"{version} runs image {pin.image}; {env} serving.image is {serving.image_name} "
            f"({', '.join(allowed)}): promote a version built for that image",
        )
    if serving.instance_type not in pin.instance_types:
        raise ConfigError(
            lock_source,
            "serving.instance_types",
            f"{version} lists {', '.join(pin.instance_types)}; {env} serving.instance_type is "
            f"{serving.instance_type}: promote a version registered for {serving.instance_type}",
        )
    subject = Subject(version, lock_source, LOCK_FIELDS)
    shape = lock_shape(lock)
    check_shape(serving, shape, subject, env)
    check_memory(serving, shape, subject, env, compiled=lock.compiled_prefix is not None)
    check_compiled(config, lock, lock_source)


def check_compiled(config: AppConfig, lock: ModelLock, lock_source: str) -> None:
    """The compiled model is of the shape the environment serves (its folder names it: shape, and for LMI the
    compiler), and a version without one is served only where the container compiles at start-up and the
    environment's Training workflow does not compile ahead of time."""
    serving, env, version = config.serving, config.source, lock.version
    spec = serving.spec
    compiled = lock.compiled_prefix
    if compiled is None:
        if spec.serves_compiled and (config.compiles_for_neuron or not spec.compiles_at_start_up):
            raise ConfigError(
                lock_source,
                "compiled_prefix",
                f"{version} has no compiled model; {env} serving.backend {spec.name} serves one of shape "
                f"{spec.compiled_folder(serving)}: promote the compiled version (RegisterCompiledModel)",
            )
        return
    step = spec.compile
    if step is None:
        raise ConfigError(
            lock_source, "compiled_prefix", f"{version}: backend {spec.name} serves no compiled model: set it to null"
        )
    if step.recorded_shape(serving) is not None:
        check_compiled_facts(config, lock, lock_source)
    folder = step.folder(serving)
    if f"/{folder}" not in f"/{compiled}":
        raise ConfigError(
            lock_source,
            "compiled_prefix",
            f"{version} is compiled as {compiled}; {env} serves shape {folder} ({spec.label} refuses another): "
            "promote a version compiled for that shape, or serve the shape it was compiled for",
        )
    if config.network.isolated and not spec.serves_compiled and not compiled.startswith(lock.model_prefix):
        raise ConfigError(
            lock_source,
            "compiled_prefix",
            f"{version}: {compiled} is not under model_prefix {lock.model_prefix}; with network.isolated: true "
            f"({env}) the container reads only the mounted model prefix: compile the graph under it",
        )


def served_prefixes(serving: ServingConfig, lock: ModelLock) -> tuple[str, str | None]:
    """(what the endpoint mounts or reads, a precompiled graph beside it): the compiled model for a backend that
    serves one (LMI NeuronX loads the partition's folder as its model, tnx_aot_tutorial.md), else the merged model;
    no separate graph for a version the workflow compiled."""
    if serving.spec.serves_compiled and lock.compiled_prefix is not None:
        return lock.compiled_prefix, None
    return lock.model_prefix, None


def with_model(config: AppConfig, lock: ModelLock, lock_source: str) -> AppConfig:
    """`config` serving `lock`'s version, after every rule (ConfigError otherwise)."""
    check_lock(config, lock, lock_source)
    prefix, graph = served_prefixes(config.serving, lock)
    served = copy.copy(config)
    object.__setattr__(served, "model", lock)
    object.__setattr__(
        served, "serving", dataclasses.replace(config.serving, model_prefix=prefix, compiled_graph_prefix=graph)
    )
    return served


def refuse_pinned_prefix(serving: ServingConfig, source: str, path: str) -> None:
    """serving.model_prefix / compiled_graph_prefix typed into the YAML: the lock names the model now."""
    for name in ("model_prefix", "compiled_graph_prefix"):
        if getattr(serving, name) is not None:
            env = Path(source).stem
            raise ConfigError(
                source,
                f"{path}.{name}",
                f"got {getattr(serving, name)!r}; the served model is config/{env}.model.json now, which only the "
                f"promotion writes: remove this line and run `make promote TO={env} VERSION=<model package ARN>`",
            )


# transformers-neuronx's amp names (what a compiled config.json records) -> LMI's option.dtype
DTYPE_OF_AMP = {"f32": "fp32", "f16": "fp16", "bf16": "bf16"}


def check_compiled_facts(config: AppConfig, lock: ModelLock, lock_source: str) -> None:
    """The compiled model's own shape (TP, positions, batch, dtype) is the one served, and its compiler is the
    serving image's: LMI loads a model compiled by another neuronx-cc or for another shape only by failing
    (djl-serving model-artifacts.md; transformers-neuronx: shapes are fixed at compile time)."""
    serving, env, version, compiled = config.serving, config.source, lock.version, lock.compiled
    spec = serving.spec
    if compiled is None:
        raise ConfigError(
            lock_source,
            "compiled",
            f"{version} records no compiled shape or compiler (compiled_* metadata, read from the compiled model's "
            "config.json by ReadCompiledFacts): register it again with the current Training workflow",
        )
    recorded = {
        "tensor_parallel_degree": compiled.tensor_parallel_degree,
        "n_positions": compiled.n_positions,
        "batch_size": compiled.batch_size,
        "dtype": DTYPE_OF_AMP.get(compiled.dtype, compiled.dtype),
    }
    served = spec.compile.recorded_shape(serving)
    differing = [name for name in served if recorded[name] != served[name]]
    if differing:
        shown = ", ".join(f"{name} {recorded[name]} (serves {served[name]})" for name in differing)
        raise ConfigError(
            lock_source,
            f"compiled.{differing[0]}",
            f"{version} is compiled with {shown}; {env} serving.lmi serves "
            f"{', '.join(f'{k} {v}' for k, v in served.items())}: promote a version compiled for that shape, or "
            "serve the shape it was compiled for",
        )
    image_compiler = spec.compile.compiler_version(serving)
    if compiled.compiler_version.split("+")[0] != image_compiler:
        raise ConfigError(
            lock_source,
            "compiled.compiler_version",
            f"{version} is compiled by neuronx-cc {compiled.compiler_version}; {env} serving.image "
            f"{serving.image_name} has neuronx-cc {image_compiler}, which fails to load it (djl-serving "
            "model-artifacts.md): compile it again in the serving image",
        )
