"""The metric lines on stdout are a contract with the SageMaker MetricDefinitions the stacks build."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest
from finetune.metrics import METRIC_DEFINITIONS, METRIC_NAMES, format_metrics
from qlora_test_helpers import QLORA_DIR

REQUIRED = {"train_loss", "eval_loss", "tokens_per_second", "learning_rate", "epoch"}


def scrape(text: str) -> dict[str, list[float]]:
    """What SageMaker would extract from a log with METRIC_DEFINITIONS."""
    return {
        definition["Name"]: [float(value) for value in re.findall(definition["Regex"], text)]
        for definition in METRIC_DEFINITIONS
    }


def test_definitions_are_in_sagemaker_form_and_cover_the_required_metrics():
    assert {definition["Name"] for definition in METRIC_DEFINITIONS} >= REQUIRED
    for definition in METRIC_DEFINITIONS:
        assert set(definition) == {"Name", "Regex"}
        assert re.compile(definition["Regex"]).groups == 1


@pytest.mark.parametrize("value", [0.0, 1.5, 2e-4, 1.25e-7, 12345.678, 3, -0.5])
def test_every_regex_parses_what_format_metrics_writes(value):
    line = format_metrics(step=7, **{name: value for name in METRIC_NAMES})
    scraped = scrape(line)
    for name in METRIC_NAMES:
        assert scraped[name] == [pytest.approx(value, rel=1e-5)], name


def test_train_loss_is_not_scraped_from_eval_loss_and_none_values_are_left_out():
    line = format_metrics(eval_loss=1.25, train_loss=None, epoch=1.0)
    assert "train_loss" not in line
    scraped = scrape(line)
    assert scraped["eval_loss"] == [1.25] and scraped["train_loss"] == []


def test_a_key_that_would_be_scraped_as_another_metric_is_refused():
    with pytest.raises(ValueError, match="train_loss"):
        format_metrics(final_train_loss=1.0)


def test_module_imports_with_the_standard_library_only():
    """The CDK stacks import it at synth time, where torch and transformers are not installed."""
    code = (
        f"import sys; sys.path.insert(0, {str(QLORA_DIR)!r}); from finetune import metrics; "
        "heavy = [m for m in ('torch', 'transformers', 'peft', 'numpy') if m in sys.modules]; "
        "assert not heavy, heavy; print(len(metrics.METRIC_DEFINITIONS))"
    )
    result = subprocess.run([sys.executable, "-S", "-c", code], capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stderr
