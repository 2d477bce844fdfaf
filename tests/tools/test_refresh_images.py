"""The committed image table is what tools/refresh_images.py generates from the SDK's tables, and has the pins."""

from __future__ import annotations

import json
import subprocess
import sys

from tests.synth import ROOT


def test_committed_table_is_up_to_date():
    result = subprocess.run(
        [sys.executable, "tools/refresh_images.py", "--check"], cwd=ROOT, capture_output=True, text=True,
        check=False, timeout=120,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "up to date" in result.stdout


def test_table_has_the_lmi_neuronx_image_the_sdk_lacks():
    images = json.loads((ROOT / "stacks" / "images.json").read_text())["images"]
    uri = images["lmi_neuronx"]["uris"]["us-east-1"]
    assert uri == "763104351884.dkr.ecr.us-east-1.amazonaws.com/djl-inference:0.30.0-neuronx-sdk2.20.1"
    assert images["hf_pytorch_training_gpu"]["pin"]["image_scope"] == "training"


def test_training_template_maps_us_east_1(templates):
    (mapping,) = templates["dev"]["Training"]["Mappings"].values()
    row = mapping["us-east-1"]
    registry = "763104351884.dkr.ecr.us-east-1.amazonaws.com"
    assert row["HfPytorchTrainingGpuUri"].startswith(f"{registry}/huggingface-pytorch-training:")
    assert row["HfPytorchTrainingGpuRegistry"] == "763104351884"
