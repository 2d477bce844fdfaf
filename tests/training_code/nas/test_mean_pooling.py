"""The mean-pooling head (MiniLM was trained with mean pooling): padding-exact, prunable, saved with its code."""

from __future__ import annotations

import pytest
import torch
from pruning.export import build_pruned_model, count_model_parameters, save_pruned_model
from pruning.masks import SubnetworkMasks
from pruning.params import EncoderShape, count_parameters
from pruning.pruned_bert import PrunedBertForSequenceClassification
from pruning.search_space import SubnetConfig
from transformers import AutoModelForSequenceClassification

PREMISES = ["Anna Berger hired the doctor in Paris on Monday.", "The lawyer was thanked by Ben Okafor."]
HYPOTHESES = ["The doctor hired Anna Berger.", "Ben Okafor thanked the lawyer."]


@pytest.fixture(scope="module")
def mean_classifier(minilm_path):
    from pruning.cli import load_classifier

    torch.manual_seed(0)
    return load_classifier(minilm_path, "mean")


def test_padding_does_not_change_a_pairs_logits(mean_classifier):
    model, tokenizer = mean_classifier
    batch = tokenizer(PREMISES, HYPOTHESES, padding=True, return_tensors="pt")
    assert batch["attention_mask"].min() == 0  # the shorter pair really is padded
    with torch.no_grad():
        together = model(**batch).logits
        alone = [
            model(**tokenizer(p, h, return_tensors="pt")).logits[0] for p, h in zip(PREMISES, HYPOTHESES, strict=True)
        ]
    torch.testing.assert_close(together, torch.stack(alone), atol=1e-5, rtol=0)


def test_head_reads_the_mean_not_cls(mean_classifier, minilm_path):
    model, tokenizer = mean_classifier
    assert isinstance(model, PrunedBertForSequenceClassification)
    assert model.config.classifier_pooling == "mean"
    cls_model = AutoModelForSequenceClassification.from_pretrained(minilm_path, num_labels=2).eval()
    cls_model.load_state_dict(model.state_dict())  # same weights, [CLS] head
    batch = tokenizer(PREMISES, HYPOTHESES, padding=True, return_tensors="pt")
    with torch.no_grad():
        assert not torch.allclose(cls_model(**batch).logits, model(**batch).logits, atol=1e-3)
    assert count_model_parameters(model) == count_model_parameters(cls_model)  # BERT's own parameters


@pytest.mark.parametrize("subnet", [SubnetConfig((12, 12), (1536, 1536)), SubnetConfig((3, 6, 0), (207, 50, 9))])
def test_pruned_mean_model_matches_masked_supernetwork_and_reloads(mean_classifier, subnet, tmp_path):
    model, tokenizer = mean_classifier
    batch = tokenizer(PREMISES, HYPOTHESES, padding=True, return_tensors="pt")
    masks = SubnetworkMasks(model)
    try:
        with torch.no_grad(), masks.use(subnet):
            masked = model(**batch).logits
    finally:
        masks.remove()
    pruned = build_pruned_model(model, subnet)
    assert isinstance(pruned, PrunedBertForSequenceClassification)  # even when all heads are kept
    assert count_model_parameters(pruned) == count_parameters(EncoderShape.from_config(model.config), subnet)
    folder = save_pruned_model(pruned, tokenizer, tmp_path / "pruned", {"subnet": subnet.to_dict()})
    loaded = AutoModelForSequenceClassification.from_pretrained(folder, trust_remote_code=True).eval()
    with torch.no_grad():
        torch.testing.assert_close(pruned(**batch).logits, masked, atol=1e-5, rtol=0)
        torch.testing.assert_close(loaded(**batch).logits, masked, atol=1e-5, rtol=0)
    assert loaded.config.classifier_pooling == "mean"


def test_supernet_folder_keeps_its_pooling(mean_classifier, tmp_path):
    from pruning.cli import load_classifier
    from train_supernetwork import save_supernet

    model, tokenizer = mean_classifier
    save_supernet(model, tokenizer, tmp_path / "supernet", {"classifier_pooling": "mean"})
    reloaded, _ = load_classifier(tmp_path / "supernet")
    batch = tokenizer(PREMISES, HYPOTHESES, padding=True, return_tensors="pt")
    with torch.no_grad():
        torch.testing.assert_close(reloaded(**batch).logits, model(**batch).logits, atol=0, rtol=0)
    assert reloaded.config.classifier_pooling == "mean"
