"""Inference handler for a (pruned) sentence-pair classifier in the Hugging Face inference container.

Request (``application/json``), any of:
    {"inputs": [["premise", "hypothesis"], ...]}
    {"inputs": {"text": "premise", "text_pair": "hypothesis"}}
    {"inputs": [{"text": "premise", "text_pair": "hypothesis"}, ...]}
Response: a JSON list, one ``{"label": ..., "score": ...}`` per pair (score = softmax probability of the
label), in request order.

Tokenization matches training (``pruning.data.tokenize_pairs``): both sentences with token types and attention
mask, truncated to the training max length from ``nas_export.json``, padded to the longest pair only.
An export made with ``--quantize dynamic_int8`` is served with its Linear layers in int8.
The four functions are plain functions of their arguments (no SageMaker imports), so a local HTTP server
can reuse them: ``bundle = model_fn(dir); output_fn(predict_fn(input_fn(body, ct), bundle), accept)``.
"""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import torch
from transformers import AutoModelForSequenceClassification, AutoTokenizer

EXPORT_METADATA = "nas_export.json"
DEFAULT_MAX_LENGTH = 128
MAX_PAIRS_PER_FORWARD = 64


def model_fn(model_dir: str, context=None) -> dict:
    """Loads model, tokenizer, label names and the training max length."""
    folder = Path(model_dir)
    metadata_file = folder / EXPORT_METADATA
    metadata = json.loads(metadata_file.read_text()) if metadata_file.exists() else {}
    config = json.loads((folder / "config.json").read_text())
    # Pruned layouts that a plain BertConfig cannot describe ship their model class next to the weights.
    model = AutoModelForSequenceClassification.from_pretrained(folder, trust_remote_code="auto_map" in config)
    model = quantize_if_requested(model.eval(), metadata)
    tokenizer = AutoTokenizer.from_pretrained(folder)
    labels = metadata.get("labels") or [model.config.id2label[i] for i in range(model.config.num_labels)]
    return {
        "model": model,
        "tokenizer": tokenizer,
        "labels": list(labels),
        "max_length": int(metadata.get("max_length", DEFAULT_MAX_LENGTH)),
    }


def quantize_if_requested(model, metadata: dict):
    """``nas_export.json`` with ``"quantization": {"method": "dynamic_int8"}``: Linear layers in int8, the
    same call as ``training_code/nas/pruning/compress.quantize_dynamic_int8`` (a test keeps them equal)."""
    method = (metadata.get("quantization") or {}).get("method", "none")
    if method == "none":
        return model
    if method != "dynamic_int8":
        raise ValueError(f"unknown quantization method {method!r} in {EXPORT_METADATA}")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch.ao deprecation notices
        return torch.ao.quantization.quantize_dynamic(model, {torch.nn.Linear}, dtype=torch.qint8)


def _pair(item, where: str) -> tuple[str, str]:
    if isinstance(item, dict):
        first, second = item.get("text"), item.get("text_pair")
    elif isinstance(item, list | tuple) and len(item) == 2:
        first, second = item
    else:
        raise ValueError(f"{where}: expected [text, text_pair] or {{'text', 'text_pair'}}")
    if not isinstance(first, str) or not isinstance(second, str):
        raise ValueError(f"{where}: text and text_pair must be strings")
    return first, second


def parse_pairs(payload) -> list[tuple[str, str]]:
    if not isinstance(payload, dict) or "inputs" not in payload:
        raise ValueError('expected a JSON object with "inputs"')
    inputs = payload["inputs"]
    if isinstance(inputs, dict):
        return [_pair(inputs, "inputs")]
    if not isinstance(inputs, list) or not inputs:
        raise ValueError('"inputs" must be a pair or a non-empty list of pairs')
    return [_pair(item, f"inputs[{i}]") for i, item in enumerate(inputs)]


def input_fn(input_data, content_type: str = "application/json") -> list[tuple[str, str]]:
    if not content_type.startswith("application/json"):
        raise ValueError(f"unsupported content type {content_type!r}; send application/json")
    if isinstance(input_data, bytes | bytearray):
        input_data = input_data.decode("utf-8")
    return parse_pairs(json.loads(input_data) if isinstance(input_data, str) else input_data)


def tokenize_pairs(tokenizer, first: list[str], second: list[str], max_length: int):
    """Same call as ``training_code/nas/pruning/data.tokenize_pairs`` (a test keeps them equal)."""
    return tokenizer(
        first,
        second,
        truncation=True,
        max_length=max_length,
        padding=True,
        return_tensors="pt",
        return_token_type_ids=True,
        return_attention_mask=True,
    )


@torch.inference_mode()
def predict_fn(pairs: list[tuple[str, str]], bundle: dict) -> list[dict]:
    predictions = []
    for start in range(0, len(pairs), MAX_PAIRS_PER_FORWARD):
        chunk = pairs[start : start + MAX_PAIRS_PER_FORWARD]
        encoded = tokenize_pairs(
            bundle["tokenizer"], [p[0] for p in chunk], [p[1] for p in chunk], bundle["max_length"]
        )
        probabilities = bundle["model"](**encoded).logits.softmax(-1)
        scores, indices = probabilities.max(-1)
        for score, index in zip(scores.tolist(), indices.tolist(), strict=True):
            predictions.append({"label": bundle["labels"][index], "score": score})
    return predictions


def output_fn(prediction: list[dict], accept: str = "application/json") -> str:
    if accept not in ("application/json", "*/*") and not accept.startswith("application/json"):
        raise ValueError(f"unsupported accept type {accept!r}; use application/json")
    return json.dumps(prediction)
