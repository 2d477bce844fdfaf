"""Cost figures from the committed price table: endpoints at min/max scale, one training run, unpriced types."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys

import pytest

from tests.synth import ROOT
from tools import cost


@pytest.fixture(scope="module")
def table():
    return cost.PriceTable.load()


def _config(env_name):
    from stacks.config import load_config

    return load_config(env_name, ROOT / "config")


def _with(config, **serving):
    changed = dataclasses.replace(config, serving=dataclasses.replace(config.serving, **serving))
    object.__setattr__(changed, "env_name", config.env_name)
    return changed


def test_price_table_is_dated_sourced_and_only_has_sourced_types(table):
    data = json.loads(cost.PRICES.read_text())
    assert data["as_of"] and "pricing" in data["source"] and data["currency"] == "USD"
    assert data["regions"]["us-east-1"]["inference"] == {
        "ml.inf2.xlarge": 0.76, "ml.inf2.8xlarge": 1.97, "ml.inf2.24xlarge": 6.49, "ml.inf2.48xlarge": 12.98,
    }
    assert data["regions"]["us-east-1"]["training"] == {}  # no verified source offline: nothing invented
    from stacks.config.serving import INF2_TYPES

    assert {name: t.usd_per_hour_us_east_1 for name, t in INF2_TYPES.items()} == (
        data["regions"]["us-east-1"]["inference"]
    )


@pytest.mark.parametrize(
    ("env_name", "itype", "low", "high", "hourly_low", "monthly_low", "hourly_high", "monthly_high"),
    [
        ("dev", "ml.inf2.xlarge", 1, 2, 0.76, 554.80, 1.52, 1109.60),
        ("prod", "ml.inf2.24xlarge", 2, 6, 12.98, 9475.40, 38.94, 28426.20),
    ],
)
def test_endpoint_cost_at_min_and_max_scale(table, env_name, itype, low, high, hourly_low, monthly_low,
                                            hourly_high, monthly_high):
    result = cost.estimate(cost.workload_from_config(_config(env_name)), table)
    assert result.region == "us-east-1" and "not pinned" in result.region_note
    at_min, at_max = (line for line in result.lines if line.key.startswith("endpoint "))
    assert (at_min.instance_type, at_min.count, at_max.count) == (itype, low, high)
    assert at_min.usd_per_hour == pytest.approx(hourly_low) and at_min.usd_total == pytest.approx(monthly_low)
    assert at_max.usd_per_hour == pytest.approx(hourly_high) and at_max.usd_total == pytest.approx(monthly_high)


def test_changed_instance_type_changes_the_cost(table):
    dev = _config("dev")
    bigger = _with(dev, instance_type="ml.inf2.8xlarge")
    before = cost.estimate(cost.workload_from_config(dev), table).lines[0]
    after = cost.estimate(cost.workload_from_config(bigger), table).lines[0]
    assert after.usd_total - before.usd_total == pytest.approx((1.97 - 0.76) * 730)


def test_training_run_without_a_price_is_not_guessed(table):
    result = cost.estimate(cost.workload_from_config(_config("dev")), table)
    run = next(line for line in result.lines if line.key.startswith("training "))
    assert (run.instance_type, run.hours, run.usd_total) == ("ml.g5.2xlarge", 12, None)
    assert result.problems == [
        "ml.g5.2xlarge (training llm-inf2-dev-Training) has no SageMaker training price for us-east-1 in "
        "tools/prices.json (as of 2026-11-29); add it there with its source instead of guessing"
    ]


def test_training_run_math_with_spot(table):
    """With a (test-only) price: on-demand run = price x count x max runtime; spot applies the table's saving."""
    data = json.loads(cost.PRICES.read_text())
    data["regions"]["us-east-1"]["training"]["ml.test.large"] = 2.0
    priced = cost.PriceTable(data)
    spot = cost.TrainingRun("t", "ml.test.large", 2, 12.0, True)
    on_demand = dataclasses.replace(spot, spot=False)
    [line] = cost.estimate(cost.Workload(None, trainings=(on_demand,)), priced).lines
    assert line.usd_per_hour == 4.0 and line.usd_total == 48.0
    [line] = cost.estimate(cost.Workload(None, trainings=(spot,)), priced).lines
    assert line.usd_total == pytest.approx(48.0 * (1 - data["managed_spot_savings"]["fraction"]))
    assert "on-demand ceiling $48.00" in line.note


def test_make_cost_prints_priced_lines_and_fails_with_one_line():
    proc = subprocess.run([sys.executable, "tools/cost.py", "--env", "prod"], cwd=ROOT, capture_output=True,
                          text=True, timeout=60)
    assert proc.returncode == 1
    assert proc.stderr.count("\n") == 1 and proc.stderr.startswith("cost error: ml.g5.2xlarge (training ")
    assert "endpoint llm-inf2-prod-Serving at min scale" in proc.stdout
    assert "$9,475.40/month" in proc.stdout and "$28,426.20/month" in proc.stdout
    bad = subprocess.run([sys.executable, "tools/cost.py", "--env", "nope"], cwd=ROOT, capture_output=True,
                         text=True, timeout=60)
    assert bad.returncode == 2 and bad.stderr.startswith("config error: ") and bad.stderr.count("\n") == 1
