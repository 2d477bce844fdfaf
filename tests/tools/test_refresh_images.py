"""The committed image table is what tools/refresh_images.py generates from the SDK's tables, and has the pins."""

from __future__ import annotations

import functools
import json
import sys

from tests.synth import ROOT


def test_committed_table_is_up_to_date(monkeypatch, capsys):
    """`tools/refresh_images.py --check`, in-process: the SDK reloads botocore's endpoints.json for every
    region and image (~130 times, most of a minute on a busy runner); one parsed copy gives the same answers."""
    import importlib.util

    from sagemaker.core import common_utils

    monkeypatch.setattr(common_utils, "_botocore_resolver", functools.cache(common_utils._botocore_resolver))
    spec = importlib.util.spec_from_file_location("refresh_images", ROOT / "tools" / "refresh_images.py")
    tool = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tool)
    monkeypatch.setattr(sys, "argv", ["refresh_images.py", "--check"])
    assert tool.main() == 0, capsys.readouterr().out
    assert "up to date" in capsys.readouterr().out


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
