"""Where things live in this repository: the one place that knows the folder layout (standard library only)."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CONFIG_DIR = ROOT / "config"
QLORA_CODE = ROOT / "training_code" / "qlora"
NAS_CODE = ROOT / "training_code" / "nas"
SERVING_ARTIFACTS = ROOT / "serving_artifacts"
ENCODER_CODE = SERVING_ARTIFACTS / "encoder_classifier" / "code"
# The one serving.properties template of the LMI NeuronX backend, beside its code: every model renders it.
LMI_PROPERTIES_TEMPLATE = ROOT / "stacks" / "serving" / "backends" / "lmi_neuronx" / "serving.properties"
IMAGES_JSON = ROOT / "stacks" / "images.json"
KERNEL_PRELOAD = ROOT / "stacks" / "kernel_preload.cjs"
ASSET_BUILD_DIR = ROOT / "build" / "assets"


def relative(path: Path) -> str:
    """`path` relative to the repository root (for messages), or as given when it lies elsewhere."""
    try:
        return Path(path).relative_to(ROOT).as_posix()
    except ValueError:
        return Path(path).as_posix()
