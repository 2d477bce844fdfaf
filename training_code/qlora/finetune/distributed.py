"""Where this process sits in a multi-GPU / multi-node job, whatever launched it.

SageMaker's own launcher (torchrun, through the Hugging Face container's `torch_distributed` distribution)
sets LOCAL_RANK, RANK and WORLD_SIZE; a single-process run has none of them. Nothing here spawns processes.
- DDP (the default when WORLD_SIZE > 1): each rank holds the whole 4-bit model on its own GPU (LOCAL_RANK).
- FSDP + QLoRA (`--fsdp`): the 4-bit weights are stored in the compute dtype (`bnb_4bit_quant_storage`) so
  that FSDP can shard them, no device_map (FSDP places the shards), rank 0 alone reads the checkpoint from
  disk (cpu_ram_efficient_loading), and checkpoints are sharded state dicts.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass


@dataclass(frozen=True)
class World:
    rank: int = 0
    local_rank: int = 0
    world_size: int = 1

    @property
    def distributed(self) -> bool:
        return self.world_size > 1

    @property
    def is_main(self) -> bool:
        return self.rank == 0


def current_world(env: Mapping[str, str] | None = None) -> World:
    env = os.environ if env is None else env
    return World(
        rank=int(env.get("RANK", "0")),
        local_rank=int(env.get("LOCAL_RANK", "0")),
        world_size=int(env.get("WORLD_SIZE", "1")),
    )


def device_map(world: World, fsdp: bool, gpu: bool) -> dict[str, int | str] | None:
    """The whole model on this rank's GPU (DDP or one GPU), on the CPU, or None for FSDP to place shards."""
    if fsdp:
        return None
    if gpu:
        return {"": world.local_rank}
    return {"": "cpu"}


def fsdp_config(gradient_checkpointing: bool) -> dict[str, object]:
    """FSDP2 settings for QLoRA (the Trainer's `fsdp_config`): sharded state dicts, rank-0 loading."""
    return {
        "version": 2,
        "auto_wrap_policy": "TRANSFORMER_BASED_WRAP",
        "state_dict_type": "SHARDED_STATE_DICT",
        "cpu_ram_efficient_loading": True,
        "activation_checkpointing": gradient_checkpointing,
    }


def ddp_backend(gpu: bool) -> str:
    return "nccl" if gpu else "gloo"


def barrier() -> None:
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        dist.barrier()
