#!/usr/bin/env python3
"""Regenerate stacks/images.json: container image URIs per region for the pinned framework versions.

Uses the image tables that ship with the `sagemaker` SDK (sagemaker-core), offline. The LMI NeuronX
image 0.30.0-neuronx-sdk2.20.1 (the last Neuron release of djl-serving) is missing from the SDK's
`djl-neuronx` table; it is published in the same registries as 0.29.0, so it is derived from them. The vLLM
Neuron image 0.11.0-optimum0.4.5 is in a newer SDK's table than the one installed: derived from 0.4.4 (DERIVED).
Run `make images` after changing a pin (below, or a serving backend's), and commit the diff.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from sagemaker.core import image_uris

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # `python tools/refresh_images.py`: the serving backends' pins live in stacks/

from stacks.serving.backends import backends  # noqa: E402

TABLE = ROOT / "stacks" / "images.json"

# name -> how to ask the SDK for it. Changing a pin here is the reviewed way to move a framework version.
PINS: dict[str, dict] = {
    "hf_pytorch_training_gpu": {
        "framework": "huggingface",
        "version": "4.56.2",
        "base_framework_version": "pytorch2.8.0",
        "instance_type": "ml.g5.2xlarge",
        "image_scope": "training",
    },
    "hf_pytorch_inference_cpu": {
        "framework": "huggingface",
        "version": "4.51.3",
        "base_framework_version": "pytorch2.6.0",
        "instance_type": "ml.c6i.xlarge",
        "image_scope": "inference",
    },
    "hf_pytorch_inference_gpu": {
        "framework": "huggingface",
        "version": "4.51.3",
        "base_framework_version": "pytorch2.6.0",
        "instance_type": "ml.g5.xlarge",
        "image_scope": "inference",
    },
}
# Images newer than the installed SDK's table: (name, derived from, tag). Each serving backend pins its own images
# (image_pins, derived_images in stacks/serving/backends/<name>/__init__.py).
PINS |= {name: pin for backend in backends().values() for name, pin in backend.image_pins.items()}
DERIVED = [derived for backend in backends().values() for derived in backend.derived_images]


def _regions(framework: str, scope: str | None) -> list[str]:
    config = image_uris.config_for_framework(framework)
    scoped = config.get(scope, config) if scope else config
    regions: set[str] = set()
    for version in scoped["versions"].values():
        if "registries" in version:
            regions |= set(version["registries"])
        for value in version.values():
            if isinstance(value, dict) and "registries" in value:
                regions |= set(value["registries"])
    return sorted(regions)


def _resolve(spec: dict) -> dict[str, str]:
    uris = {}
    for region in _regions(spec["framework"], spec.get("image_scope")):
        try:
            uris[region] = image_uris.retrieve(region=region, **spec)
        except ValueError:
            continue  # that version is not published in this region
    return uris


def build_table() -> dict:
    images = {name: {"pin": spec, "uris": _resolve(spec)} for name, spec in PINS.items()}
    for name, source, tag in DERIVED:
        uris = {r: uri.rsplit(":", 1)[0] + ":" + tag for r, uri in images[source]["uris"].items()}
        images[name] = {"pin": {"derived_from": source, "tag": tag}, "uris": uris}
    return {
        "generated_by": "tools/refresh_images.py",
        "source": "sagemaker-core image_uri_config tables",
        "images": {name: images[name] for name in sorted(images)},
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if the committed table is stale")
    args = parser.parse_args()
    text = json.dumps(build_table(), indent=1, sort_keys=True) + "\n"
    if args.check:
        stale = not TABLE.is_file() or TABLE.read_text() != text
        print("stacks/images.json is stale; run tools/refresh_images.py" if stale else "up to date")
        return 1 if stale else 0
    TABLE.write_text(text)
    print(f"wrote {TABLE} ({len(text)} bytes)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
