"""The committed container-image table (stacks/images.json, written by tools/refresh_images.py), read once.

Standard library only: config validation (LMI version from the tag) and the ContainerImages construct both read it here.
"""

from __future__ import annotations

import json
from functools import cache

from .paths import IMAGES_JSON


@cache
def image_table() -> dict[str, dict[str, str]]:
    """{image name: {region: uri}} as committed."""
    data = json.loads(IMAGES_JSON.read_text())
    return {name: dict(entry["uris"]) for name, entry in data["images"].items()}


def image_uris(name: str) -> tuple[str, ...]:
    """Every distinct URI of one image across regions (empty for an unknown name)."""
    return tuple(sorted(set(image_table().get(name, {}).values())))


def regions_for(names) -> list[str]:
    """Regions where every named image is published."""
    table = image_table()
    sets = [set(table[name]) for name in names]
    return sorted(set.intersection(*sets)) if sets else []
