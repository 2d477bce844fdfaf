"""The serving section: which model an environment serves on ml.inf2, with which backend, and how.

The served model is config/<env>.model.json, the lock the promotion writes (model_lock.py); without it (a new
account's empty bucket) the environment has no Serving stack, so a first deploy creates no endpoint with nothing
to load. The settings every backend shares live here; each backend (stacks/serving/backends/<name>/config.py) adds
its own section and cross-field rules, all checked before any CDK code runs, with one-line errors.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Literal

from ..serving.backends import Backend as BackendRecord
from ..serving.backends import backend as backend_named
from ..serving.backends import backends, image_names, names
from . import aws_limits as aws
from .endpoint import AlarmConfig, AutoscalingConfig, DataCaptureConfig, RolloutConfig, check_variant
from .errors import ConfigError
from .inf2 import INF2_TYPES, Inf2Type
from .scale_to_zero import ComponentSize, ScaleToZeroConfig, check_component_rollout, component_size
from .schema import setting
from .served_model import refuse_pinned_prefix

S3_PREFIX = r"([A-Za-z0-9!_.*'()=-]+/)+"
ECR_IMAGE = r"\d{12}\.dkr\.ecr\.[a-z0-9-]+\.amazonaws\.com(\.cn)?/[a-z0-9._/-]+:[\w.-]+"
Backend = Literal[names()]  # the folders under stacks/serving/backends/
ImageName = Literal[image_names()]
__all__ = ["INF2_TYPES", "Inf2Type", "ServingConfig", "backend_named"]


def _or_list(items: list[str]) -> str:
    return ", ".join(items[:-1]) + " or " + items[-1] if len(items) > 1 else "".join(items)


_BACKEND_HINT = _or_list([f"{b.name} {b.note}".strip() for b in backends().values()])
_MODEL_NAME_HINT = "; ".join(f"{b.name}: {b.model_name_hint}" for b in backends().values())


@dataclass(frozen=True)
class _ServingSettings:
    """The settings every backend shares; each backend's own section is added below (ServingConfig)."""

    model_name: str = setting(pattern=r"[a-z0-9][a-z0-9._-]{0,62}", hint=_MODEL_NAME_HINT)
    # Read from the training base's record (config/models/, model_catalog.py), never typed in the YAML.
    model_parameters_billions: float = setting(
        ge=1e-9, le=1000, hint="from the base model's record: the size the profile is built for"
    )
    base_model: str = setting("", hint="from the training base: the hub id of the record the size is read from")
    # Set from config/<env>.model.json (the promotion's lock), never in the YAML: a value there is refused.
    model_prefix: str | None = setting(None, pattern=S3_PREFIX, hint="from config/<env>.model.json")
    backend: Backend = setting("lmi_neuronx", hint=_BACKEND_HINT)
    compiled_graph_prefix: str | None = setting(None, pattern=S3_PREFIX, hint="from config/<env>.model.json")
    image: ImageName | None = setting(None, hint="stacks/images.json; null: the backend's image")
    image_uri: str | None = setting(None, pattern=ECR_IMAGE, hint="overrides the region table", aws=aws.MODEL_IMAGE)
    lmi_version: str | None = setting(None, pattern=r"\d+\.\d+\.\d+", hint="needed when image_uri's tag hides it")
    instance_type: str = setting("ml.inf2.xlarge", pattern=r"ml\.[a-z0-9-]+\.[a-z0-9]+")
    initial_instance_count: int = setting(1, le=100, aws=aws.VARIANT_INSTANCE_COUNT)  # le: autoscaling's cap
    # Project: at least 4 GB; the volume holds the downloaded weights (ml.inf2 has no instance storage), and the
    # smallest model served here is 1.1B parameters, 2.2 GB in 16 bits.
    volume_size_gb: int = setting(64, ge=4, aws=aws.VARIANT_VOLUME_SIZE)
    container_startup_health_check_timeout_seconds: int = setting(1800, aws=aws.VARIANT_STARTUP_TIMEOUT)
    model_data_download_timeout_seconds: int = setting(600, aws=aws.VARIANT_DOWNLOAD_TIMEOUT)
    rollout: RolloutConfig = setting(RolloutConfig())
    autoscaling: AutoscalingConfig = setting(AutoscalingConfig())
    alarms: AlarmConfig = setting(AlarmConfig())
    data_capture: DataCaptureConfig = setting(DataCaptureConfig())
    scale_to_zero: ScaleToZeroConfig = setting(ScaleToZeroConfig())

    @property
    def inf2(self) -> Inf2Type:
        return INF2_TYPES[self.instance_type]

    @property
    def spec(self) -> BackendRecord:
        """The backend's record (stacks/serving/backends/<backend>/)."""
        return backend_named(self.backend)

    @property
    def image_name(self) -> str:
        """The stacks/images.json entry: the configured one or the backend's default."""
        return self.image or self.spec.images[0]

    @property
    def backend_label(self) -> str:
        return self.spec.label

    def check(self, source: str, path: str) -> None:
        spec = self.spec
        if self.instance_type not in INF2_TYPES:
            raise ConfigError(
                source,
                f"{path}.instance_type",
                f"got {self.instance_type!r}; the {spec.label} container needs an Inferentia2 type: "
                + ", ".join(INF2_TYPES),
            )
        if self.image_name not in spec.images:
            raise ConfigError(
                source,
                f"{path}.image",
                f"got {self.image!r}; backend {self.backend} runs {', '.join(spec.images)} (or null)",
            )
        for other in backends().values():
            if other != spec and other.section and getattr(self, other.section) != other.options():
                raise ConfigError(
                    source,
                    f"{path}.{other.section}",
                    f"only for backend {other.name}; backend is {self.backend}: remove the section",
                )
        refuse_pinned_prefix(self, source, path)
        spec.check(self, source, path)
        check_variant(self, source, path)
        if self.scale_to_zero.enabled:
            component_size(self, source, path)
            check_component_rollout(self, source, path)

    @property
    def component(self) -> ComponentSize | None:
        """What one inference-component copy needs (scale to zero on), else None: plain variant hosting."""
        return component_size(self, "", "serving") if self.scale_to_zero.enabled else None

    def warnings(self, path: str = "serving") -> list[str]:
        """Risky but legal settings, as `field: problem` lines."""
        return self.spec.warnings(self, path)


def _section(record: BackendRecord) -> tuple[str, type, dataclasses.Field]:
    return record.section, record.options, setting(record.options(), hint=record.section_hint)


ServingConfig = dataclasses.make_dataclass(
    "ServingConfig",
    [_section(b) for b in backends().values() if b.section],
    bases=(_ServingSettings,),
    frozen=True,
    namespace={
        "__doc__": "One model on one ml.inf2 variant behind one backend's container (serving.backend).",
        "__module__": __name__,
    },
)
