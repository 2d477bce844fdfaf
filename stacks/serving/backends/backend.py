"""The typed interface of a serving backend: everything the stacks, the config and the tools may ask of one.

A backend folder (stacks/serving/backends/<name>/) defines one subclass of `Backend` and exposes an instance as
`BACKEND`; nothing outside the folder names it. The members fall in six groups: its settings (the
`serving.<section>` dataclass and cross-field rules), its container contract (images, the request and answer,
where a mounted model is read), its endpoint construct, its compile step (a `CompileStep`, or None), the model
types it loads, and its memory and shape rules. aws_cdk types appear only in annotations: config validation
imports this module before aws_cdk, and a backend imports its CDK modules inside the methods that return them.
"""

from __future__ import annotations

import importlib
from abc import ABC, abstractmethod
from collections.abc import Mapping
from types import ModuleType
from typing import TYPE_CHECKING, ClassVar, Protocol

if TYPE_CHECKING:
    from argparse import Namespace

    from aws_cdk import aws_s3_assets as s3_assets
    from constructs import Construct

    from stacks.config.hosts import HostKind
    from stacks.config.serving import ServingConfig
    from stacks.serving.hosting import EndpointProps
    from stacks.shared.sagemaker_endpoint import SageMakerEndpoint

JsonValue = str | int | float | bool | None | list["JsonValue"] | dict[str, "JsonValue"]
JsonObject = dict[str, JsonValue]
# Where a compile step's program finds the merged model (the job's `model` channel) and writes the compiled one
# (uploaded as the job's output): stacks/training/compile_job.py mounts and uploads them.
MODEL_CHANNEL = "/opt/ml/input/data/model"
OUTPUT_DIR = "/opt/ml/model"


class Endpoint(Protocol):
    """What the Serving stack reads back from a backend's construct once built."""

    hosting: SageMakerEndpoint
    model_asset: s3_assets.Asset | None  # a tarball the container reads beside the model, or None


class EndpointConstruct(Protocol):
    """A backend's CDK construct class: keyword-only props, as stacks/serving/stack.py builds it."""

    def __call__(self, scope: Construct, construct_id: str, *, props: EndpointProps) -> Endpoint: ...


class CompileStep(ABC):
    """The Training workflow's ahead-of-time compile of the merged model: the backend's image and its own program,
    run by stacks/training/compile_job.py as a SageMaker training job (MODEL_CHANNEL in, OUTPUT_DIR out); its output
    folder names the compiled shape."""

    program: ClassVar[str]  # what the job runs, in descriptions and the rehearsal note
    host_kind: ClassVar[HostKind | None] = None  # the training hosts `make profile` tries for it (None: any)

    def image(self, serving: ServingConfig) -> str:
        """stacks/images.json's name of the image the job runs: the serving image (same compiler as serving)."""
        return serving.image_name

    @abstractmethod
    def folder(self, serving: ServingConfig) -> str:
        """The folder under the merged model the job writes into (and a served compiled prefix must contain)."""

    @abstractmethod
    def entrypoint(self) -> tuple[str, ...]:
        """The job's ContainerEntrypoint (each item <= 256 characters, CreateTrainingJob's limit)."""

    @abstractmethod
    def arguments(self, serving: ServingConfig) -> tuple[str, ...]:
        """The job's ContainerArguments for the served shape, one flag or value each."""

    def environment(self, serving: ServingConfig, source: str) -> dict[str, str] | None:
        """The job's environment, where the program reads settings from it (None: the image's own)."""
        return None

    def recorded_shape(self, serving: ServingConfig) -> Mapping[str, int | str] | None:
        """The shape the compiled model's own config.json records, as the lock's `compiled` section names it;
        None when the artifact records none (nothing is read back into the registry)."""
        return None

    def compiler_version(self, serving: ServingConfig) -> str | None:
        """The serving image's compiler, which the compiled model must have been built by (None: not checked)."""
        return None

    def host_problem(self, serving: ServingConfig, instance_type: str) -> tuple[str, str] | None:
        """(field, problem) when training.neuron_compile's host (`instance_type`) cannot compile the profile's
        model."""
        return None


class Backend(ABC):
    """One serving container. Class attributes are its facts; methods its rules (`serving` is the environment's
    validated ServingConfig)."""

    # Its settings
    name: ClassVar[str]  # serving.backend's value, and the folder's name
    label: ClassVar[str]  # in messages and resource descriptions, e.g. "vLLM Neuron"
    note: ClassVar[str] = ""  # after its name in serving.backend's hint, e.g. "(discontinued)"
    model_name_hint: ClassVar[str]  # what serving.model_name means for it
    section: ClassVar[str | None] = None  # serving.<section>: its own settings, or None
    options: ClassVar[type | None] = None  # the dataclass of serving.<section> (defaults: the section left out)
    section_hint: ClassVar[str] = ""
    # serving.<section> keys `make profile` writes: (TP degree, batch, served positions), and a loading timeout
    shape_keys: ClassVar[tuple[str, str, str] | None] = None
    loading_key: ClassVar[str | None] = None

    @abstractmethod
    def check(self, serving: ServingConfig, source: str, path: str) -> None:
        """Its cross-field rules: one ConfigError line for the first broken one."""

    def warnings(self, serving: ServingConfig, path: str) -> list[str]:
        """Legal but risky settings, as `field: problem` lines."""
        return []

    # Its container contract
    images: ClassVar[tuple[str, ...]]  # stacks/images.json names it runs; the first is the default
    image_pins: ClassVar[Mapping[str, Mapping[str, str]]] = {}  # tools/refresh_images.py: SDK lookups
    derived_images: ClassVar[tuple[tuple[str, str, str], ...]] = ()  # (name, derived from, tag) for newer images
    model_environment: ClassVar[Mapping[str, str]]  # where its container reads a mounted model (registry packages)
    local_server: ClassVar[str]  # the module that serves its contract on this machine (`serve_cli(args)`)

    @abstractmethod
    def build_request(self, args: Namespace) -> JsonObject:
        """tools/invoke.py's arguments -> the request body."""

    @abstractmethod
    def parse_response(self, body: bytes | str, status: int = 200) -> list[str]:
        """(body, HTTP status) -> the generated texts, or InvokeError with one line."""

    def request_warnings(self, payload: Mapping[str, JsonValue]) -> list[str]:
        """What tools/invoke.py warns about a request the container accepts but ignores."""
        return []

    def local_server_module(self) -> ModuleType:
        """`local_server`, imported when local/ starts it (stacks never import local/)."""
        return importlib.import_module(self.local_server)

    # Its endpoint
    @abstractmethod
    def endpoint(self) -> EndpointConstruct:
        """The CDK construct class, imported when a stack builds it (aws_cdk stays out of config validation)."""

    # Its compile step
    compile: ClassVar[CompileStep | None] = None
    serves_compiled: ClassVar[bool] = False  # the endpoint mounts the compiled model: a version needs one
    compiles_at_start_up: ClassVar[bool] = False  # it can compile an uncompiled model when it starts

    # The model types it loads
    architectures: ClassVar[tuple[str, ...]]  # config.json model_type values its loader knows

    # Its memory and shape rules (what stacks/config/served_model.py checks a model's facts against)
    shards_kv_heads: ClassVar[bool] = False  # TP and num_key_value_heads must divide one another
    tensor_parallel_degrees: ClassVar[tuple[int, ...]] = ()  # the TP degrees `make profile` tries on ml.inf2

    def served_positions(self, serving: ServingConfig) -> tuple[str, int] | None:
        """(field, positions) it serves, or None when it does not fix them."""
        return None

    def tensor_parallel(self, serving: ServingConfig) -> tuple[str, int] | None:
        """(field, degree) it shards the heads over, or None."""
        return None

    def memory_problem(self, serving: ServingConfig, billions: float, compiled: bool) -> str | None:
        """Its own memory rule on the model's true size (compiled: the version brings a compiled graph)."""
        return None

    def compiled_folder(self, serving: ServingConfig) -> str | None:
        """The folder a compiled model of the served shape is in, or None when it serves no compiled model."""
        return self.compile.folder(serving) if self.compile is not None else None
