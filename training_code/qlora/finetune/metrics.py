"""Metric lines on stdout and the regexes that parse them.

Standard library only: the CDK stacks import METRIC_DEFINITIONS at synth time, where torch is absent.
A SageMaker training job scrapes stdout with these regexes, so the line format is a contract.
"""

from __future__ import annotations

import math

_NUMBER = r"([0-9.eE+-]+)"

METRIC_NAMES: tuple[str, ...] = (
    "train_loss",
    "eval_loss",
    "tokens_per_second",
    "learning_rate",
    "epoch",
    "grad_norm",
    "peak_memory_gb",
    "merge_max_abs_logit_diff",
    # The held-out evaluation of finetune.evaluate: base (as loaded for the merge) vs merged, same tokens.
    "eval_loss_base",
    "eval_loss_merged",
    "eval_perplexity_base",
    "eval_perplexity_merged",
    "eval_rouge_l_base",
    "eval_rouge_l_merged",
    "eval_loss_improvement",
)

# Plain regexes (no look-arounds) so any regex engine on the scraping side accepts them. No logged key may
# end with a metric name unless it is that metric; format_metrics enforces it.
METRIC_DEFINITIONS: list[dict[str, str]] = [{"Name": name, "Regex": rf"{name}={_NUMBER}"} for name in METRIC_NAMES]


def _format_value(value: float | int) -> str:
    if isinstance(value, bool):
        return str(int(value))
    if isinstance(value, int):
        return str(value)
    if math.isnan(value) or math.isinf(value):
        return str(value)
    return f"{value:.6g}"


def format_metrics(**values: float | int | None) -> str:
    """One line of space-separated key=value pairs; None values are left out."""
    for key in values:
        clash = [name for name in METRIC_NAMES if key != name and key.endswith(name)]
        if clash:
            raise ValueError(f"metric key {key!r} would be scraped as {clash[0]!r}")
    return " ".join(f"{key}={_format_value(value)}" for key, value in values.items() if value is not None)
