"""serving.scale_to_zero's refusals, one line each: production traffic, idle time CloudWatch cannot alarm on, a copy
that cannot fit the instance; and what one copy asks for where it fits."""

from __future__ import annotations

import dataclasses
import re
import shutil

import botocore.session
import pytest

from stacks.config import ConfigError, load_config
from stacks.config.scale_to_zero import component_size
from tests.synth import ROOT, load_served


@pytest.fixture
def config_dir(tmp_path):
    """A copy of config/ (the files as they ship, with the model catalog) to edit one setting in."""
    shutil.copytree(ROOT / "config", tmp_path / "config")
    return tmp_path / "config"


def _edit(config_dir, env: str, old: str, new: str) -> None:
    path = config_dir / f"{env}.yaml"
    text = path.read_text()
    assert text.count(old) == 1, old
    path.write_text(text.replace(old, new))


PROD_SETTING = "  scale_to_zero:\n    enabled: false"


def test_scale_to_zero_where_deploys_need_approval_is_refused_unless_allowed(config_dir):
    _edit(config_dir, "prod", PROD_SETTING, "  scale_to_zero:\n    enabled: true")
    with pytest.raises(ConfigError) as caught:
        load_config("prod", config_dir, served=False)
    assert str(caught.value) == (
        f"{config_dir.as_posix()}/prod.yaml: serving.scale_to_zero.enabled: got true where deploy.approval is true "
        "(production traffic): the first request after an idle spell fails for minutes while a copy starts; set "
        "enabled: false, or allow_with_deploy_approval: true"
    )
    _edit(config_dir, "prod", "scale_to_zero:\n", "scale_to_zero:\n    allow_with_deploy_approval: true\n")
    assert load_config("prod", config_dir, served=False).serving.scale_to_zero.enabled


def _one_day_of_minutes() -> int:
    """From botocore's own words on PutMetricAlarm's Period: sub-hour periods evaluate over at most one day."""
    model = botocore.session.get_session().get_service_model("cloudwatch")
    text = model.operation_model("PutMetricAlarm").input_shape.members["Period"].documentation
    seconds = re.search(r"can't be longer than one day \(([\d,]+) seconds\)", text).group(1)
    return int(seconds.replace(",", "")) // 60


@pytest.mark.parametrize("minutes", [0, "day+1"])
def test_idle_minutes_outside_what_cloudwatch_alarms_on_is_refused(config_dir, minutes):
    value = _one_day_of_minutes() + 1 if minutes == "day+1" else minutes
    _edit(config_dir, "dev", "idle_minutes: 30", f"idle_minutes: {value}")
    with pytest.raises(ConfigError) as caught:
        load_config("dev", config_dir, served=False)
    line = str(caught.value)
    assert f"serving.scale_to_zero.idle_minutes: got {value}" in line and "\n" not in line
    assert line.endswith(f"(CloudWatch PutMetricAlarm EvaluationPeriods: 1..{_one_day_of_minutes()})"), line


def test_a_copy_whose_tp_degree_needs_more_devices_than_the_instance_has_is_refused():
    serving = load_served("dev").serving  # ml.inf2.xlarge: one Inferentia2 device, two NeuronCores
    wide = dataclasses.replace(serving, lmi=dataclasses.replace(serving.lmi, tensor_parallel_degree=4))
    with pytest.raises(ConfigError) as caught:
        component_size(wide, "config/dev.yaml", "serving")
    assert str(caught.value) == (
        "config/dev.yaml: serving.scale_to_zero.enabled: got true with serving.lmi.tensor_parallel_degree 4: a copy "
        "needs 2 Inferentia2 devices (2 NeuronCores each), ml.inf2.xlarge has 1; lower the TP degree or pick a "
        "larger type"
    )


def test_a_copy_whose_weights_exceed_the_host_memory_is_refused():
    serving = load_served("dev").serving  # ml.inf2.xlarge: 16 GB of host memory
    large = dataclasses.replace(serving, model_parameters_billions=13.0)
    with pytest.raises(ConfigError) as caught:
        component_size(large, "config/dev.yaml", "serving")
    assert str(caught.value) == (
        "config/dev.yaml: serving.scale_to_zero.enabled: got true with a 13.00B-parameter model: a copy needs 24796 "
        "MiB of host memory for its 16-bit weights, ml.inf2.xlarge has 16384; pick a larger type"
    )


def test_a_larger_instance_holds_as_many_copies_as_its_devices_allow():
    serving = load_served("dev").serving
    wide = dataclasses.replace(serving, instance_type="ml.inf2.48xlarge")  # 12 devices, 768 GB (AWS Inf2 table)
    size = component_size(wide, "config/dev.yaml", "serving")
    assert size.accelerator_devices == 1 and size.copies_per_instance == 12


def test_a_blue_green_rollout_of_a_component_is_refused(config_dir):
    """UpdateInferenceComponent's DeploymentConfig requires a RollingUpdatePolicy and offers no blue/green."""
    model = botocore.session.get_session().get_service_model("sagemaker")
    deployment = model.shape_for("InferenceComponentDeploymentConfig")
    assert deployment.required_members == ["RollingUpdatePolicy"] and "BlueGreenUpdatePolicy" not in deployment.members
    _edit(config_dir, "dev", "    strategy: rolling\n", "    strategy: blue_green\n")
    with pytest.raises(ConfigError) as caught:
        load_config("dev", config_dir, served=False)
    assert str(caught.value) == (
        f"{config_dir.as_posix()}/dev.yaml: serving.rollout.strategy: got 'blue_green' with scale_to_zero enabled: "
        "an inference component is updated only by rolling batches (UpdateInferenceComponent's RollingUpdatePolicy); "
        "set strategy: rolling"
    )
