"""The QLoRA fit's figures against the libraries and the reference recipe; the training hosts against botocore."""

from __future__ import annotations

import json

import pytest

from stacks.config.base_model_record import BaseModelRecord
from stacks.config.hosts import TRAINING_HOSTS
from stacks.config.instance_types import TRAINING, valid_types
from stacks.config.model_catalog import read_catalog
from stacks.config.qlora_fit import PROJECTIONS, cheapest_fit, lora_parameters, qlora_need
from stacks.config.training import MULTI_GPU_TYPES, SEED_HYPERPARAMETERS
from tests.synth import ROOT

TINY = {
    "hidden_size": 64,
    "intermediate_size": 96,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "head_dim": 16,
    "vocab_size": 128,
}


@pytest.fixture(scope="module")
def tiny_llama():
    """A tiny grouped-query Llama (transformers) and its record."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    model = LlamaForCausalLM(LlamaConfig(**TINY, max_position_embeddings=64, tie_word_embeddings=False))
    record = BaseModelRecord(
        hub_id="tiny/llama",
        source="test",
        model_type="llama",
        architecture="LlamaForCausalLM",
        parameters=sum(p.numel() for p in model.parameters()),
        dtype="float32",
        context_length=64,
        tie_word_embeddings=False,
        **TINY,
    )
    return model, record


@pytest.mark.parametrize("targets", [list(PROJECTIONS), ["q_proj", "v_proj", "lm_head"]], ids=["auto", "named"])
def test_lora_parameters_are_what_peft_trains(tiny_llama, targets):
    """The LoRA term counts what peft makes trainable for the same r and targets."""
    import copy

    from peft import LoraConfig, get_peft_model

    model, record = tiny_llama
    peft_model = get_peft_model(copy.deepcopy(model), LoraConfig(r=8, target_modules=targets))
    trainable = sum(p.numel() for p in peft_model.parameters() if p.requires_grad)
    named = "auto" if targets == list(PROJECTIONS) else ",".join(targets)
    assert lora_parameters(record, 8, named) == trainable


def test_the_seed_recipe_trains_on_the_seeds_instance():
    """The seed's QLoRA of Llama-2-7B (batch 4, 512 tokens, r 64, fp16 merge) runs on ml.g5.2xlarge (REFERENCE.md:
    24 GB A10G, 32 GB host RAM), the cheapest priced GPU type that holds it: ml.g5.xlarge's 16 GiB cannot hold the
    13.5 GB merge."""
    prices = json.loads((ROOT / "tools" / "prices.json").read_text())["regions"]["us-east-1"]["training"]
    record = read_catalog(ROOT / "config")["llama-2-7b-chat-hf"].record
    need = qlora_need(record, SEED_HYPERPARAMETERS)
    assert need.gpu_gib <= 24 and 16 < need.host_gib <= 32
    assert cheapest_fit(need, prices) == "ml.g5.2xlarge"


def test_a_longer_sequence_needs_more_gpu_memory_and_the_same_host_memory():
    record = read_catalog(ROOT / "config")["qwen2.5-7b-instruct"].record
    short = qlora_need(record, {"max_seq_length": "512"})
    long = qlora_need(record, {"max_seq_length": "2048"})
    assert long.gpu_gib > short.gpu_gib and long.host_gib == short.host_gib


def test_every_training_host_is_a_sagemaker_training_type():
    """Each type the hosts table knows is one botocore's TrainingInstanceType lists."""
    assert set(TRAINING_HOSTS) <= set(valid_types(TRAINING))


def test_the_hosts_table_counts_the_gpus_the_training_config_does():
    """Multi-GPU types have the GPU count the training job's world size uses (stacks/config/training.py)."""
    for name, host in TRAINING_HOSTS.items():
        if host.gpus > 1:
            assert MULTI_GPU_TYPES[name] == host.gpus, name
