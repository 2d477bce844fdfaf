"""The serving handler, in process, against an exported pruned model."""

from __future__ import annotations

import importlib.util
import json

import pytest
import torch
from nas_test_helpers import HANDLER_DIR
from pruning.data import tokenize_pairs
from pruning.export import build_pruned_model, save_pruned_model
from pruning.search_space import SubnetConfig

PREMISE, HYPOTHESIS = "On Monday, Anna bought a new bicycle in Paris after work.", "Anna purchased a bicycle."


@pytest.fixture(scope="module")
def handler():
    spec = importlib.util.spec_from_file_location("encoder_classifier_inference", HANDLER_DIR / "inference.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def exported(classifier, tmp_path_factory):
    model, tokenizer = classifier
    pruned = build_pruned_model(model, SubnetConfig((4, 2), (300, 20)))
    folder = tmp_path_factory.mktemp("export")
    save_pruned_model(pruned, tokenizer, folder, {"max_length": 24, "labels": ["entailment", "not_entailment"]})
    return folder, pruned, tokenizer


def test_handler_answers_both_request_forms_like_the_model(handler, exported):
    folder, pruned, tokenizer = exported
    bundle = handler.model_fn(str(folder))
    assert bundle["max_length"] == 24
    body = json.dumps({"inputs": [[PREMISE, HYPOTHESIS], ["A cat sleeps.", "A dog barks loudly at night."]]})
    answer = json.loads(
        handler.output_fn(handler.predict_fn(handler.input_fn(body, "application/json"), bundle), "application/json")
    )
    encoded = tokenize_pairs(tokenizer, [PREMISE, "A cat sleeps."], [HYPOTHESIS, "A dog barks loudly at night."], 24)
    with torch.no_grad():
        probabilities = pruned(**encoded).logits.softmax(-1)
    assert [a["label"] for a in answer] == [["entailment", "not_entailment"][int(i)] for i in probabilities.argmax(-1)]
    assert [a["score"] for a in answer] == pytest.approx(probabilities.max(-1).values.tolist(), abs=1e-6)
    single = handler.input_fn(
        json.dumps({"inputs": {"text": PREMISE, "text_pair": HYPOTHESIS}}).encode(), "application/json"
    )
    assert handler.predict_fn(single, bundle)[0] == pytest.approx(answer[0])


def test_handler_tokenizes_exactly_like_training(handler, exported):
    _, _, tokenizer = exported
    long_text = " ".join(["word"] * 100)
    first, second = [PREMISE, long_text], [HYPOTHESIS, long_text]
    ours, theirs = (
        tokenize_pairs(tokenizer, first, second, 24),
        handler.tokenize_pairs(tokenizer, first, second, 24),
    )
    assert set(ours) == set(theirs) == {"input_ids", "token_type_ids", "attention_mask"}
    for key in ours:
        assert torch.equal(ours[key], theirs[key])
    assert ours["input_ids"].shape[1] == 24  # truncated to the training max length, not 512
    assert ours["token_type_ids"][0].max() == 1 and ours["attention_mask"].sum() < ours["attention_mask"].numel()


@pytest.mark.parametrize(
    "body",
    [
        {"text": "no inputs"},
        {"inputs": []},
        {"inputs": [["only one"]]},
        {"inputs": [[1, 2]]},
        {"inputs": {"text": "a"}},
    ],
)
def test_handler_rejects_malformed_requests(handler, body):
    with pytest.raises(ValueError):
        handler.input_fn(json.dumps(body), "application/json")


def test_handler_rejects_other_content_types(handler):
    with pytest.raises(ValueError, match="content type"):
        handler.input_fn("a,b", "text/csv")


def test_handler_serves_a_mean_pooling_export_like_the_model(handler, minilm_path, tmp_path):
    """A pruned export of a mean-pooling super-network carries its class: the handler loads it and pads a
    batch without changing a pair's probabilities."""
    from pruning.cli import load_classifier

    torch.manual_seed(1)
    model, tokenizer = load_classifier(minilm_path, "mean")
    pruned = build_pruned_model(model, SubnetConfig((6, 6), (768, 768)))
    save_pruned_model(pruned, tokenizer, tmp_path, {"max_length": 64, "labels": ["entailment", "not_entailment"]})
    bundle = handler.model_fn(str(tmp_path))
    pairs = [[PREMISE, HYPOTHESIS], ["A cat sleeps.", "A dog barks loudly at night."]]
    answer = handler.predict_fn(handler.input_fn(json.dumps({"inputs": pairs}), "application/json"), bundle)
    with torch.no_grad():
        alone = [pruned(**tokenize_pairs(tokenizer, [p], [h], 64)).logits.softmax(-1)[0] for p, h in pairs]
    assert [a["score"] for a in answer] == pytest.approx([float(p.max()) for p in alone], abs=1e-5)
    assert type(bundle["model"]).__name__ == "PrunedBertForSequenceClassification"
