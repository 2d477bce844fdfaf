"""A first deploy into an empty account creates no endpoint: every shipped environment serves nothing until
a version is promoted into config/<env>.model.json (and dev's pruning model keys are set), which docs/aws.md
orders after a Training run."""

from __future__ import annotations

import pytest

from tests.conftest import ENVIRONMENTS
from tests.synth import templates as by_unit

MODEL_TYPES = {"AWS::SageMaker::Model", "AWS::SageMaker::EndpointConfig", "AWS::SageMaker::Endpoint"}


@pytest.mark.parametrize("env", ENVIRONMENTS)
def test_shipped_environment_creates_no_model_or_endpoint(shipped_assemblies, env):
    units = by_unit(shipped_assemblies[env])
    assert "Serving" not in units
    found = {
        (unit, r["Type"]) for unit, t in units.items() for r in t["Resources"].values() if r["Type"] in MODEL_TYPES
    }
    assert found == set()
    assert {"Data", "Training"} <= set(units)


@pytest.mark.parametrize("env", ENVIRONMENTS)
def test_promoting_a_version_adds_the_serving_stack(assemblies, env):
    """tests.synth.served: the same file with its lock beside it (the guide's last step)."""
    template = by_unit(assemblies[env])["Serving"]
    assert {r["Type"] for r in template["Resources"].values()} >= MODEL_TYPES


@pytest.mark.parametrize("env", ENVIRONMENTS)
def test_turning_serving_on_adds_stacks_without_touching_data_or_training(shipped_assemblies, assemblies, env):
    """The key policy already lets CloudWatch alarms use the Data key, so the second deploy is additive."""
    shipped, served = by_unit(shipped_assemblies[env]), by_unit(assemblies[env])
    for unit in ("Data", "Training"):
        assert shipped[unit] == served[unit], unit
