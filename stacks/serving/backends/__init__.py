"""The serving backends: one folder each (stacks/serving/backends/<name>/), found here by name.

A backend folder holds `__init__.py` (its `Backend` subclass, backend.py, as `BACKEND`), `config.py` (its
`serving.<section>` settings and cross-field rules, no CDK), `contract.py` (the request and answer of its
container, standard library), `endpoint.py` (its CDK construct, imported only when a stack builds it), its compile
step's request (`compile_job.py`, CDK, imported only when the Training stack builds it) and any file its container
reads that every model shares (lmi_neuronx/serving.properties, the template rendered from serving.lmi). The config
schema (stacks/config/serving.py), the Serving and Training stacks, tools/invoke.py, tools/refresh_images.py and the
local servers read a backend through `backend(name)`; adding one is a folder plus its images in stacks/images.json.
No aws_cdk here: config validation runs before aws_cdk is imported.
"""

from __future__ import annotations

import importlib
import pkgutil
from functools import cache

from .backend import Backend, CompileStep

__all__ = ["Backend", "CompileStep", "backend", "backends", "image_names", "names"]


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
