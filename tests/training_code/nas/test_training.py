"""Training strategies: each runs, updates weights, and the distillation loss behaves."""

from __future__ import annotations

import copy
import random

import pytest
import torch
from nas_data import batches, load_splits
from nas_masks import SubnetworkMasks
from nas_training import TrainSettings, distillation_loss, subnetworks_for_step, training_step


def test_distillation_loss_is_zero_for_equal_logits_and_scales_with_temperature():
    logits = torch.tensor([[2.0, -1.0], [0.5, 0.3]])
    assert distillation_loss(logits, logits, 2.0).item() == pytest.approx(0.0, abs=1e-7)
    student = torch.tensor([[0.0, 0.0], [0.0, 0.0]])
    assert distillation_loss(student, logits, 1.0).item() > 0


@pytest.mark.parametrize("strategy", ["standard", "sandwich", "kd"])
def test_one_step_of_each_strategy_moves_the_weights(classifier, sample_data_dir, strategy):
    model = copy.deepcopy(classifier[0]).train()
    tokenizer = classifier[1]
    settings = TrainSettings(strategy=strategy, batch_size=2, max_length=32, num_random_subnets=1)
    masks = SubnetworkMasks(model)
    subnets = subnetworks_for_step(settings, masks, random.Random(0))
    assert len(subnets) == (0 if strategy == "standard" else 2)
    batch = next(batches(load_splits("jsonl", sample_data_dir)["train"][:2], tokenizer, 2, 32))
    before = model.bert.encoder.layer[0].intermediate.dense.weight.detach().clone()
    loss = training_step(model, masks, batch, settings, random.Random(0))
    torch.optim.SGD(model.parameters(), lr=0.1).step()
    masks.remove()
    assert loss > 0 and torch.isfinite(torch.tensor(loss))
    assert not torch.equal(before, model.bert.encoder.layer[0].intermediate.dense.weight)
    # The smallest sub-network (no layers) never reaches layer 5's FFN, random ones may: grads stay finite.
    assert all(torch.isfinite(p.grad).all() for p in model.parameters() if p.grad is not None)


def test_unknown_strategy_is_rejected():
    with pytest.raises(ValueError, match="unknown strategy"):
        TrainSettings(strategy="magic")


def test_sandwich_lower_bound_mixes_tokens(classifier):
    from nas_masks import model_dims
    from nas_training import training_smallest

    dims = model_dims(classifier[0].config)
    assert training_smallest("uniform", dims, 0).num_layers == 0  # the space's own minimum
    for space in ("uniform", "per_layer"):
        smallest = training_smallest(space, dims, 1)
        assert smallest.num_layers == 1 and smallest.heads[0] >= 1 and smallest.units[0] == 0
    settings = TrainSettings(
        strategy="kd", search_space="per_layer", num_random_subnets=20, min_subnet_layers=2
    )
    masks = SubnetworkMasks(classifier[0])
    try:
        assert all(c.num_layers >= 2 for c in subnetworks_for_step(settings, masks, random.Random(1)))
    finally:
        masks.remove()
