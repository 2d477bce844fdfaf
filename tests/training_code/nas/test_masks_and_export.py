"""Masked super-network == physically pruned model (logits and exact parameter count)."""

from __future__ import annotations

import random

import pytest
import torch
from pruning.export import build_pruned_model, count_model_parameters, save_pruned_model
from pruning.masks import SubnetworkMasks, model_dims
from pruning.params import EncoderShape, count_parameters, layer_parameters
from pruning.search_space import ModelDims, SubnetConfig, largest_config, sample_config
from transformers import AutoModelForSequenceClassification

# Logits of the pruned model may differ from the masked super-network only by float32 summation order.
LOGITS_ATOL = 1e-5

SUBNETS = [
    SubnetConfig((3, 0, 12, 5), (100, 1536, 0, 7)),  # per-layer heads/units, a layer without heads
    SubnetConfig((6, 6, 6), (512, 512, 512)),  # uniform
    SubnetConfig((12, 12), (384, 384)),  # all heads: a plain BertConfig
    SubnetConfig((), ()),  # no layers at all
]
PAIRS = (
    ["A man is eating food in the park.", "The cat sleeps."],
    ["Someone eats.", "A dog is running fast."],
)


def encode(tokenizer):
    return tokenizer(*PAIRS, padding=True, truncation=True, max_length=64, return_tensors="pt")


def test_bert_base_count_matches_the_seed_fact():
    shape = EncoderShape(
        vocab_size=28996,
        hidden_size=768,
        num_heads=12,
        max_position_embeddings=512,
        type_vocab_size=2,
        num_labels=2,
    )
    assert count_parameters(shape, largest_config(ModelDims(12, 12, 3072))) == 108_311_810


def test_output_projection_shrinks_with_the_heads():
    shape = EncoderShape(28996, 768, 12, 512, 2, 2)
    # One head fewer removes 64 columns of Q, K, V (weights + biases) and 64 input rows of O; O's bias stays.
    assert layer_parameters(shape, 12, 3072) - layer_parameters(shape, 11, 3072) == 3 * (768 * 64 + 64) + 64 * 768
    assert layer_parameters(shape, 0, 0) == 768 + 2 * 768 + 768 + 2 * 768


@pytest.mark.parametrize("subnet", SUBNETS, ids=["per-layer", "uniform", "plain", "no-layers"])
def test_pruned_model_matches_masked_supernetwork(classifier, subnet):
    model, tokenizer = classifier
    batch = encode(tokenizer)
    masks = SubnetworkMasks(model)
    try:
        with torch.no_grad():
            full = model(**batch).logits
            with masks.use(subnet):
                masked = model(**batch).logits
            after = model(**batch).logits
    finally:
        masks.remove()
    pruned = build_pruned_model(model, subnet)
    with torch.no_grad():
        physical = pruned(**batch).logits
    torch.testing.assert_close(physical, masked, atol=LOGITS_ATOL, rtol=0)
    torch.testing.assert_close(after, full, atol=0, rtol=0)  # masks are lifted after the block
    assert not torch.allclose(masked, full, atol=1e-4)  # the sub-network is really a different function
    assert count_model_parameters(pruned) == count_parameters(EncoderShape.from_config(model.config), subnet)


def test_parameter_formula_is_exact_on_random_per_layer_subnetworks(classifier):
    model, _ = classifier
    shape, rng = EncoderShape.from_config(model.config), random.Random(3)
    for _ in range(5):
        subnet = sample_config("per_layer", model_dims(model.config), rng)
        assert count_model_parameters(build_pruned_model(model, subnet)) == count_parameters(shape, subnet)


def test_saved_model_loads_with_auto_class_and_keeps_logits(classifier, tmp_path):
    model, tokenizer = classifier
    batch = encode(tokenizer)
    for i, subnet in enumerate(SUBNETS[:3]):
        pruned = build_pruned_model(model, subnet)
        folder = save_pruned_model(pruned, tokenizer, tmp_path / str(i), {"subnet": subnet.to_dict()})
        loaded = AutoModelForSequenceClassification.from_pretrained(folder, trust_remote_code=True).eval()
        with torch.no_grad():
            torch.testing.assert_close(loaded(**batch).logits, pruned(**batch).logits, atol=0, rtol=0)
        assert count_model_parameters(loaded) == count_model_parameters(pruned)
        assert loaded.config.num_hidden_layers == subnet.num_layers
        assert ("auto_map" in loaded.config.to_dict()) == (i != 2)


@pytest.mark.parametrize("heads, units", [((12,) * 6, (1536,) * 6), ((3, 6, 0), (207, 0, 50)), ((), ())])
def test_mac_count_matches_torch_flop_counter(classifier, heads, units):
    """Every Linear's multiply-accumulates as torch counts them (FLOPs = 2 x MACs); the attention products
    (scores and weighted values: 2 n^2 h d per layer) run in kernels the counter skips, so they are added
    by formula."""
    from pruning.params import EncoderShape, count_macs
    from torch.utils.flop_counter import FlopCounterMode

    model, tokenizer = classifier
    subnet = SubnetConfig(heads, units)
    pruned = build_pruned_model(model, subnet)
    batch = tokenizer(
        ["Anna bought a bike in Paris on Monday after work."], ["Anna purchased a bicycle."], return_tensors="pt"
    )
    tokens = batch["input_ids"].shape[1]
    with torch.no_grad(), FlopCounterMode(display=False) as counter:
        pruned(**batch)
    head_size = model.config.hidden_size // model.config.num_attention_heads
    attention = sum(2 * tokens * tokens * h * head_size for h in heads)
    assert counter.get_total_flops() == 2 * (
        count_macs(EncoderShape.from_config(model.config), subnet, tokens) - attention
    )
