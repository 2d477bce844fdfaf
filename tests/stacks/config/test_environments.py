"""Environments as code: dev and prod differ where they should, and the synthesized stacks show it."""

from __future__ import annotations

import pytest

from tests.synth import ROOT


@pytest.fixture(scope="module")
def configs():
    from stacks.config import load_config

    return {name: load_config(name, ROOT / "config") for name in ("dev", "prod")}


def test_dev_and_prod_differ_where_they_should(configs):
    dev, prod = configs["dev"], configs["prod"]
    assert (dev.termination_protection, prod.termination_protection) == (False, True)
    assert dev.data.noncurrent_version_expiration_days < prod.data.noncurrent_version_expiration_days
    assert (dev.training.spot, prod.training.spot) == (True, False)
    assert dev.serving.initial_instance_count < prod.serving.initial_instance_count
    assert dev.serving.autoscaling.min_capacity < prod.serving.autoscaling.min_capacity
    assert dev.serving.autoscaling.max_capacity < prod.serving.autoscaling.max_capacity
    assert prod.serving.alarms.model_latency_p90_ms < dev.serving.alarms.model_latency_p90_ms


def test_no_environment_file_names_the_served_model():
    """The served model is config/<env>.model.json, which the promotion writes; the YAML names none."""
    for path in sorted((ROOT / "config").glob("*.yaml")):
        lines = [line for line in path.read_text().splitlines() if not line.lstrip().startswith("#")]
        keys = [line.split(":")[0].strip() for line in lines]
        assert "model_prefix" not in keys and "compiled_graph_prefix" not in keys, path.name


def test_synthesized_stacks_carry_the_differences(assemblies):
    protection = {
        env: {s.stack_name: s.termination_protection for s in assembly.stacks} for env, assembly in assemblies.items()
    }
    assert set(protection["dev"].values()) == {False}
    assert set(protection["prod"].values()) == {True}

    def noncurrent_days(env):
        [template] = [s.template for s in assemblies[env].stacks if s.stack_name.endswith("-Data")]
        days = [
            rule["NoncurrentVersionExpiration"]["NoncurrentDays"]
            for lid, res in template["Resources"].items()
            if res["Type"] == "AWS::S3::Bucket" and lid.startswith("ArtifactBucket")
            for rule in res["Properties"].get("LifecycleConfiguration", {}).get("Rules", [])
            if "NoncurrentVersionExpiration" in rule
        ]
        return days

    assert noncurrent_days("dev") == [30] and noncurrent_days("prod") == [365]
