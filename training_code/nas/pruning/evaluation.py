"""Scores one sub-network: validation error, exact parameter count, MACs and measured CPU latency.

The sub-network is pruned physically first (a cheap weight copy): its logits equal the masked
super-network's, so the error is the same, and unlike a masked model its latency reflects its size.
"""

from __future__ import annotations

import statistics
import time

import torch

from .data import Pair, tokenize_pairs
from .export import build_pruned_model, count_model_parameters
from .params import EncoderShape, count_macs, count_parameters
from .search_space import SubnetConfig
from .training import error_rate


def latency_batch(tokenizer, pairs: list[Pair], batch_size: int, max_length: int) -> dict:
    """A fixed batch (the first ``batch_size`` pairs, cycled if fewer) to time every model on."""
    chosen = [pairs[i % len(pairs)] for i in range(batch_size)]
    first, second = [p.sentence1 for p in chosen], [p.sentence2 for p in chosen]
    return dict(tokenize_pairs(tokenizer, first, second, max_length))


def mean_tokens(tokenizer, pairs: list[Pair], max_length: int) -> int:
    """The mean tokenized pair length (truncated like training): the sequence length MACs are counted at."""
    first, second = [p.sentence1 for p in pairs], [p.sentence2 for p in pairs]
    encoded = tokenizer(first, second, truncation=True, max_length=max_length)
    return round(sum(len(ids) for ids in encoded["input_ids"]) / len(pairs))


@torch.inference_mode()
def measure_latency_ms(model, batch: dict, repeats: int = 20, warmup: int = 3) -> dict:
    """p50/p95 wall time of one forward pass, in milliseconds."""
    model.eval()
    for _ in range(warmup):
        model(**batch)
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        model(**batch)
        times.append((time.perf_counter() - start) * 1000.0)
    times.sort()
    p95_index = min(len(times) - 1, round(0.95 * (len(times) - 1)))
    return {"p50": statistics.median(times), "p95": times[p95_index]}


def evaluate_subnetwork(
    super_model,
    tokenizer,
    subnet: SubnetConfig,
    pairs: list[Pair],
    max_length: int,
    timing_batch: dict | None = None,
    repeats: int = 20,
    batch_size: int = 32,
    tokens: int | None = None,
) -> dict:
    """One no-gradient pass over ``pairs``; latency (p50, ms) on ``timing_batch`` and MACs of one
    ``tokens``-token sequence when given."""
    pruned = build_pruned_model(super_model, subnet)
    shape = EncoderShape.from_config(super_model.config)
    num_parameters = count_parameters(shape, subnet)
    if num_parameters != count_model_parameters(pruned):
        actual = count_model_parameters(pruned)
        raise AssertionError(f"parameter formula {num_parameters} != pruned model {actual}")
    result = {
        "validation_error": error_rate(pruned, tokenizer, pairs, max_length, batch_size),
        "num_parameters": num_parameters,
    }
    if tokens is not None:
        result["macs"] = count_macs(shape, subnet, tokens)
    if timing_batch is not None:
        result["latency_ms"] = measure_latency_ms(pruned, timing_batch, repeats)["p50"]
    return result


@torch.inference_mode()
def interleaved_latency_ms(models: list, batch: dict, repeats: int, warmup: int = 3) -> list[float]:
    """p50 wall time (ms) of each model, timed in rounds (one pass of every model per round) so that a
    change in machine load hits all of them alike: the final front's latency, measured for real."""
    for model in models:
        model.eval()
        for _ in range(warmup):
            model(**batch)
    times: list[list[float]] = [[] for _ in models]
    for _ in range(repeats):
        for i, model in enumerate(models):
            start = time.perf_counter()
            model(**batch)
            times[i].append((time.perf_counter() - start) * 1000.0)
    return [statistics.median(t) for t in times]
