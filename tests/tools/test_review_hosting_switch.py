"""Switching dev and staging between a model on the variant and a scale-to-zero component, as the review shows it.

The base is each environment served with serving.scale_to_zero off (one synth per environment for the module), the
head the session's templates (on): the review flags the switch as a replacement and prices it.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from tools import cost, review_diff
from tools.review_diff.model import Kind

# on-demand per instance-hour (tools/prices.json, us-east-1) x 730 h: one instance always on before the switch
ALWAYS_ON = {"dev": ("ml.inf2.xlarge", "$722.70/month"), "staging": ("ml.inf2.8xlarge", "$1,722.80/month")}


@pytest.fixture(scope="module")
def switches(assemblies, tmp_path_factory):
    """{env: (plain side, component side)} as review_diff reads assemblies."""
    from tests.synth import load_served, replaced, synth

    sides = {}
    for env in ALWAYS_ON:
        config = load_served(env)
        plain_serving = dataclasses.replace(
            config.serving, scale_to_zero=dataclasses.replace(config.serving.scale_to_zero, enabled=False)
        )
        plain = synth(replaced(config, serving=plain_serving), tmp_path_factory.mktemp(f"{env}-plain"))
        sides[env] = (
            review_diff.read_assembly(Path(plain.directory)),
            review_diff.read_assembly(Path(assemblies[env].directory)),
        )
    return sides


@pytest.mark.parametrize("env", list(ALWAYS_ON))
def test_a_switch_to_a_component_is_flagged_as_a_replacement(switches, env):
    plain, component = switches[env]
    result = review_diff.review(plain, component, "scale to zero")
    (switch,) = [w for w in result.warnings if w.kind == Kind.HOSTING_SWITCH]
    assert switch.type == "AWS::SageMaker::EndpointConfig" and "inference component" in switch.message
    assert "clients get errors" in switch.message
    assert "**HOSTING SWITCH (REPLACEMENT)**" in review_diff.render(result)
    back = review_diff.review(component, plain, "back to the variant")
    (undo,) = [w for w in back.warnings if w.kind == Kind.HOSTING_SWITCH]
    assert "back to a model on the variant" in undo.message


@pytest.mark.parametrize("env", list(ALWAYS_ON))
def test_the_cost_delta_shows_the_always_on_instance_go(switches, env):
    plain, component = switches[env]
    rows, notes = review_diff.cost_delta(plain, component, cost.PriceTable.load())
    instance, always_on = ALWAYS_ON[env]
    (at_min,) = [row for row in rows if row[0].endswith("at min scale") and "Serving" in row[0]]
    assert at_min[1:] == (f"1 x {instance} -> 0 x {instance}", always_on, "$0.00/month", f"-{always_on}")
    assert any("while a copy runs" in note for note in notes), notes
