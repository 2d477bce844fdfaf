"""The one reader of the AWS service models botocore ships (standard library only): each parsed once, when first asked.

The files are read directly: botocore.loaders would import urllib3 and its optional codecs into the synth. A model's
newest API version is the one botocore's clients use; `service-2.sdk-extras.json` is merged as botocore's loader does.
"""

from __future__ import annotations

import gzip
import json
from functools import cache
from pathlib import Path
from typing import Any


def _read(path: Path) -> dict[str, Any]:
    """`path` as JSON, or its `.gz` twin (botocore ships most models compressed)."""
    packed = path.with_name(path.name + ".gz")
    if packed.exists():
        return json.loads(gzip.decompress(packed.read_bytes()).decode("utf-8"))
    return json.loads(path.read_text(encoding="utf-8"))


@cache
def service_model(service: str) -> dict[str, Any]:
    """The service model of `service` (botocore's name: 'sagemaker', 'cloudwatch', 'application-autoscaling', ...)."""
    import botocore

    newest = sorted((Path(botocore.__file__).parent / "data" / service).iterdir())[-1]
    model = _read(newest / "service-2.json")
    extras = newest / "service-2.sdk-extras.json"
    if extras.exists():
        _merge(model, _read(extras)["merge"])
    return model


def _merge(target: dict[str, Any], extra: dict[str, Any]) -> None:
    for key, value in extra.items():
        if isinstance(value, dict) and isinstance(target.get(key), dict):
            _merge(target[key], value)
        else:
            target[key] = value


def shapes(service: str) -> dict[str, Any]:
    """The `shapes` table of `service`'s model: name -> shape (type, members, min, max, pattern, enum)."""
    return service_model(service)["shapes"]
