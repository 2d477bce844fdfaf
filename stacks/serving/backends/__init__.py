"""The serving backends: one folder each (stacks/serving/backends/<name>/), found here by name.

A backend folder holds `__init__.py` (its `BACKEND` record), `config.py` (its `serving.<section>` settings and
cross-field rules, no CDK), `contract.py` (the request and answer of its container, standard library),
`endpoint.py` (its CDK construct, imported only when a stack builds it) and any file its container reads that
every model shares (lmi_neuronx/serving.properties, the template rendered from serving.lmi). The config schema
(stacks/config/serving.py), the Serving stack, tools/invoke.py, tools/refresh_images.py and the local servers
read a backend through `backend(name)`; adding one is a folder plus its images in stacks/images.json.
No aws_cdk here: config validation runs before aws_cdk is imported.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import cache
from typing import Any


def _no_warnings(*_: Any) -> list[str]:
    return []


def _no_problem(*_: Any) -> str | None:
    return None


@dataclass(frozen=True)
class Backend:
    """What the rest of the app knows about one serving container; `serving` arguments are a ServingConfig."""

    name: str  # serving.backend's value, and the folder's name
    label: str  # in messages and resource descriptions, e.g. "vLLM Neuron"
    architectures: tuple[str, ...]  # config.json model_type values its loader knows
    images: tuple[str, ...]  # stacks/images.json names it runs; the first is the default
    model_name_hint: str  # what serving.model_name means for it
    check: Callable[[Any, str, str], None]  # its cross-field rules: (serving, source, path), ConfigError
    endpoint: str  # "module:Class" of its construct (keyword-only props, see stacks/serving/stack.py)
    model_environment: Mapping[str, str]  # where its container reads a mounted model (Model Registry packages)
    build_request: Callable[[Any], dict[str, Any]]  # tools/invoke.py's arguments -> the request body
    parse_response: Callable[[bytes | str, int], list[str]]  # (body, HTTP status) -> texts, or InvokeError
    local_server: str  # the module that serves its contract on this machine (`serve_cli(args)`)
    note: str = ""  # after its name in serving.backend's hint, e.g. "(discontinued)"
    section: str | None = None  # serving.<section>: its own settings, or None
    options: type | None = None  # the dataclass of serving.<section> (defaults: the section left out)
    section_hint: str = ""
    warnings: Callable[[Any, str], list[str]] = _no_warnings  # (serving, path) -> `field: problem` lines
    request_warnings: Callable[[dict[str, Any]], list[str]] = _no_warnings  # invoke.py warnings on a request
    image_pins: Mapping[str, dict] = field(default_factory=dict)  # tools/refresh_images.py: SDK lookups
    derived_images: tuple[tuple[str, str, str], ...] = ()  # (name, derived from, tag) for newer images
    # What stacks/config/served_model.py checks a model's facts against (serving -> (field, value)):
    served_positions: Callable[[Any], tuple[str, int]] | None = None  # the positions (tokens) it serves
    tensor_parallel: Callable[[Any], tuple[str, int]] | None = None  # the TP degree it shards the heads over
    shards_kv_heads: bool = False  # TP and num_key_value_heads must divide one another
    # The TP degrees its container runs on ml.inf2 (the candidates `make profile` tries; the rules still decide)
    tensor_parallel_degrees: tuple[int, ...] = ()
    compiled_folder: Callable[[Any], str] | None = None  # the folder a compiled prefix of its shape contains
    serves_compiled: bool = False  # the endpoint mounts the compiled model: a version needs one
    compiles_at_start_up: bool = False  # it can also compile an uncompiled model when it starts (no compile step)
    compiled_shape: Callable[[Any], dict[str, Any]] | None = None  # the shape a lock's `compiled` section names
    compiler_version: Callable[[Any], str] | None = None  # the serving image's neuronx-cc
    compile_program: str = ""  # what the Training workflow's compile step runs in its image
    compile_problem: Callable[[Any], tuple[str, str] | None] | None = None  # (config) -> (field, problem): its host
    memory_problem: Callable[[Any, float, bool], str | None] = _no_problem  # (serving, billions, compiled)

    def endpoint_class(self) -> type:
        """The CDK construct, imported now (aws_cdk stays out of config validation)."""
        module, _, name = self.endpoint.partition(":")
        return getattr(importlib.import_module(module), name)

    def local_server_module(self) -> Any:
        return importlib.import_module(self.local_server)


@cache
def backends() -> dict[str, Backend]:
    """Every backend folder's record, by name (folder order); discovered on first use, not at import."""
    found = {}
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda i: i.name):
        if info.ispkg:
            record = importlib.import_module(f"{__name__}.{info.name}").BACKEND
            if record.name != info.name:
                raise ValueError(f"stacks/serving/backends/{info.name}/ declares backend {record.name!r}")
            found[record.name] = record
    return found


def backend(name: str) -> Backend:
    return backends()[name]


def names() -> tuple[str, ...]:
    return tuple(backends())


def image_names() -> tuple[str, ...]:
    """Every serving image name, backend by backend (serving.image's allowed values)."""
    return tuple(image for record in backends().values() for image in record.images)
