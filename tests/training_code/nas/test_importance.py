"""Rewiring by importance keeps the full network's function and puts the important heads/units first."""

from __future__ import annotations

import copy

import torch
from pruning.data import batches, load_splits
from pruning.importance import importance_scores, rewire
from pruning.masks import SubnetworkMasks
from pruning.search_space import SubnetConfig


def _batches(tokenizer, sample_data_dir, rows=8):
    return list(batches(load_splits("jsonl", sample_data_dir)["train"][:rows], tokenizer, 4, 32))


def _scores(model, data):
    masks = SubnetworkMasks(model)
    try:
        return importance_scores(masks, data)
    finally:
        masks.remove()


def test_rewiring_keeps_the_full_network_and_sorts_scores(classifier, sample_data_dir):
    model, tokenizer = copy.deepcopy(classifier[0]), classifier[1]
    data = _batches(tokenizer, sample_data_dir)
    inputs = {k: v for k, v in data[0].items() if k != "labels"}
    with torch.no_grad():
        before = model(**inputs).logits
    heads, units = _scores(model, data)
    assert all(float(h.sum()) > 0 for h in heads) and all(float(u.sum()) > 0 for u in units)
    orders = rewire(model, heads, units)
    with torch.no_grad():
        torch.testing.assert_close(model(**inputs).logits, before, atol=1e-5, rtol=0)
    assert sorted(orders[0]["heads"]) == list(range(model.config.num_attention_heads))
    assert orders[0]["heads"] != list(range(model.config.num_attention_heads))  # something moved
    heads_after, units_after = _scores(model, data)
    for i, (h, u) in enumerate(zip(heads_after, units_after, strict=True)):
        torch.testing.assert_close(h, heads[i][orders[i]["heads"]], rtol=1e-3, atol=1e-6)
        assert torch.all(h[:-1] >= h[1:] - 1e-6 * h.max())  # descending: prefixes keep the best
        assert torch.all(u[:-1] >= u[1:] - 1e-6 * u.max())


def test_rewired_prefix_keeps_the_most_important_head(classifier, sample_data_dir):
    """A one-head sub-network of the rewired model is the original model restricted to its top head."""
    model, tokenizer = copy.deepcopy(classifier[0]), classifier[1]
    data = _batches(tokenizer, sample_data_dir)
    inputs = {k: v for k, v in data[0].items() if k != "labels"}
    heads, units = _scores(model, data)
    top_head = int(torch.argmax(heads[0]))
    layers = model.config.num_hidden_layers
    original = copy.deepcopy(model)
    original_masks = SubnetworkMasks(original)
    head_size = model.config.hidden_size // model.config.num_attention_heads
    # The original network with only ``top_head`` in layer 0: zero every other head's context slice.
    keep = torch.zeros(model.config.hidden_size)
    keep[top_head * head_size : (top_head + 1) * head_size] = 1.0
    original_masks._head_masks[0] = keep
    with torch.no_grad():
        expected = original(**inputs).logits
    original_masks.remove()
    rewire(model, heads, units)
    masks = SubnetworkMasks(model)
    full = model.config.intermediate_size
    subnet = SubnetConfig((1,) + (model.config.num_attention_heads,) * (layers - 1), (full,) * layers)
    with torch.no_grad(), masks.use(subnet):
        got = model(**inputs).logits
    masks.remove()
    torch.testing.assert_close(got, expected, atol=1e-5, rtol=0)


def test_scores_are_per_example_gradient_magnitudes(classifier, sample_data_dir):
    """Michel et al.: the sum over examples of |dLoss_x/dgate|. Scoring a batch of 4 must equal scoring the
    same 4 examples one at a time; |gradient of the batch loss| would let examples cancel out (smaller)."""
    model, tokenizer = copy.deepcopy(classifier[0]), classifier[1]
    rows = load_splits("jsonl", sample_data_dir)["train"][:4]
    together = _scores(model, list(batches(rows, tokenizer, 4, 32)))
    alone = _scores(model, list(batches(rows, tokenizer, 1, 32)))
    for got, expected in zip(together[0] + together[1], alone[0] + alone[1], strict=True):
        torch.testing.assert_close(got, expected, rtol=1e-3, atol=1e-7)
    masks = SubnetworkMasks(model)
    batch = next(batches(rows, tokenizer, 4, 32))
    gates = [torch.ones(model.config.num_attention_heads, requires_grad=True) for _ in range(len(together[0]))]
    units = [torch.ones(model.config.intermediate_size, requires_grad=True) for _ in range(len(together[0]))]
    with masks.scaled(gates, units):
        logits = model(**{k: v for k, v in batch.items() if k != "labels"}).logits
    loss = torch.nn.functional.cross_entropy(logits, batch["labels"], reduction="sum")
    pooled = torch.autograd.grad(loss, gates)
    masks.remove()
    assert sum(float(g.abs().sum()) for g in pooled) < sum(float(h.sum()) for h in together[0])
