"""Two ranks under torchrun (gloo, CPU): data split over ranks, one merge on rank 0, the same adapter shape."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from finetune.card import MODEL_KIND_FILE
from finetune.distributed import World, current_world, device_map
from qlora_test_helpers import QLORA_DIR, instruction_rows, load_train_entry, tiny_run_args, write_jsonl
from safetensors.torch import load_file

pytestmark = pytest.mark.slow


def test_world_comes_from_torchrun_variables_and_places_the_model():
    world = current_world({"RANK": "3", "LOCAL_RANK": "1", "WORLD_SIZE": "4"})
    assert world == World(rank=3, local_rank=1, world_size=4) and world.distributed and not world.is_main
    assert device_map(world, fsdp=False, gpu=True) == {"": 1}  # each DDP rank on its own GPU, not GPU 0
    assert device_map(world, fsdp=True, gpu=True) is None  # FSDP places the shards itself
    assert current_world({}) == World() and device_map(World(), fsdp=False, gpu=False) == {"": "cpu"}


def test_two_process_torchrun_trains_and_merges_the_same_adapter_shape(tiny_llama, tmp_path):
    data = write_jsonl(tmp_path / "train.jsonl", instruction_rows(48))
    flags = ["--max_steps", "2", "--no-resume"]
    single = load_train_entry().main(tiny_run_args(tiny_llama, data, tmp_path / "single", *flags))
    env = {**os.environ, "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1"}
    argv = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--standalone",
        "--nproc_per_node",
        "2",
        str(QLORA_DIR / "train.py"),
        *tiny_run_args(tiny_llama, data, tmp_path / "ddp", *flags),
    ]
    result = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=600, check=False)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    report = json.loads((tmp_path / "ddp" / "training_report.json").read_text())
    assert report["world"] == {"world_size": 2, "rank": 0, "fsdp": False}
    assert report["merge"]["check"]["passed"]
    assert json.loads((tmp_path / "ddp" / "model" / MODEL_KIND_FILE).read_text())["kind"] == "merged"
    # Each step sees one batch per rank: twice the single process's tokens, counted over both ranks.
    assert report["throughput"]["train_tokens"] > 1.5 * single["throughput"]["train_tokens"]
    lines = result.stdout.splitlines()
    assert sum("step=2 " in line and "train_loss=" in line for line in lines) == 1  # metric lines from rank 0 only
    assert sum("step=2 " in line and "eval_loss=" in line for line in lines) == 1  # the final evaluation
    one = load_file(tmp_path / "single" / "adapter" / "adapter_model.safetensors")
    two = load_file(tmp_path / "ddp" / "adapter" / "adapter_model.safetensors")
    assert {k: v.shape for k, v in one.items()} == {k: v.shape for k, v in two.items()}


def test_fsdp_settings_store_4bit_weights_in_the_compute_dtype_and_shard_checkpoints():
    import argparse

    import torch
    from finetune.distributed import fsdp_config
    from finetune.model import quantization_config
    from finetune.trainer import _parallel_arguments

    storage = quantization_config("bfloat16", True, "nf4", fsdp=True).bnb_4bit_quant_storage
    assert storage == torch.bfloat16  # FSDP can only shard parameters of one float dtype with the rest
    assert quantization_config("bfloat16", True, "nf4").bnb_4bit_quant_storage == torch.uint8
    config = fsdp_config(gradient_checkpointing=True)
    assert config["state_dict_type"] == "SHARDED_STATE_DICT" and config["cpu_ram_efficient_loading"] is True
    assert config["activation_checkpointing"] is True and config["version"] == 2
    parallel = _parallel_arguments(argparse.Namespace(fsdp=True, gradient_checkpointing=False))
    assert parallel["fsdp"] is True and parallel["fsdp_config"]["activation_checkpointing"] is False
    assert "ddp_backend" not in parallel  # a single process never waits for ranks that will not come
