"""dev and staging host the served version as an inference component that scales to zero and back.

Checked on the session's templates: the component, the variant that holds no model, the copy count's scalable
target and its policies and alarms; each new resource's properties as the API request they become, against
botocore's request shapes (cfn-lint checks the templates themselves in test_cfn_lint.py).
"""

from __future__ import annotations

import pytest

from tests.stacks.botocore_limits import Unknown, limit_violations
from tests.synth import FACTS, SERVED, load_served

ENVS = ("dev", "staging")
MIB = 2**20
# Inferentia2 devices per copy: both serve at TP 2, and "each Inferentia2 device has two NeuronCores-v2" (AWS Neuron
# docs, Inferentia2 architecture), so one device; ml.inf2.xlarge and 8xlarge have one device each.
DEVICES = {"dev": 1, "staging": 1}


def _of_type(template: dict, resource_type: str) -> dict[str, dict]:
    return {k: v for k, v in template["Resources"].items() if v["Type"] == resource_type}


def _one(template: dict, resource_type: str) -> tuple[str, dict]:
    (found,) = _of_type(template, resource_type).items()
    return found


def _unknowns(value):
    """The template's value with each intrinsic (Ref, Fn::*) as an Unknown: known only at deploy."""
    if isinstance(value, dict):
        if len(value) == 1 and next(iter(value)).startswith(("Ref", "Fn::")):
            return Unknown(str(value))
        return {k: _unknowns(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_unknowns(v) for v in value]
    return value


@pytest.mark.parametrize("env", ENVS)
def test_the_variant_holds_no_model_and_scales_instances_down_to_zero(templates, env):
    _, config = _one(templates[env]["Serving"], "AWS::SageMaker::EndpointConfig")
    (variant,) = config["Properties"]["ProductionVariants"]
    assert "ModelName" not in variant, "the component names the model"
    assert variant["InstanceType"] == SERVED[env][5]
    scaling = variant["ManagedInstanceScaling"]
    assert scaling["Status"] == "ENABLED" and scaling["MinInstanceCount"] == 0
    assert scaling["MaxInstanceCount"] == load_served(env).serving.autoscaling.max_capacity  # one copy per instance
    assert variant["RoutingConfig"] == {"RoutingStrategy": "LEAST_OUTSTANDING_REQUESTS"}
    assert "ExecutionRoleArn" in config["Properties"], "SageMaker starts the component's copies with the role"


@pytest.mark.parametrize("env", ENVS)
def test_the_component_asks_for_the_devices_and_memory_of_one_copy(templates, env):
    template = templates[env]["Serving"]
    _, component = _one(template, "AWS::SageMaker::InferenceComponent")
    props = component["Properties"]
    model_id, _ = _one(template, "AWS::SageMaker::Model")
    spec = props["Specification"]
    assert spec["ModelName"] == {"Fn::GetAtt": [model_id, "ModelName"]}
    weights = FACTS[SERVED[env][0]]["size_bytes"]  # the served model's 16-bit weights, as training recorded them
    assert spec["ComputeResourceRequirements"] == {
        "NumberOfAcceleratorDevicesRequired": DEVICES[env],
        "MinMemoryRequiredInMb": -(-weights // MIB),
    }
    serving = load_served(env).serving
    assert spec["StartupParameters"]["ContainerStartupHealthCheckTimeoutInSeconds"] == (
        serving.container_startup_health_check_timeout_seconds
    )
    assert props["RuntimeConfig"] == {"CopyCount": 1} and props["VariantName"] == "AllTraffic"
    tags = {t["Key"]: t["Value"] for t in props["Tags"]}
    assert "model-revision" in tags, "a promotion shows as an update of the component"


@pytest.mark.parametrize("env", ENVS)
def test_a_promotion_updates_the_component_rolling_with_alarm_rollback(templates, env):
    template = templates[env]["Serving"]
    _, component = _one(template, "AWS::SageMaker::InferenceComponent")
    rollout = load_served(env).serving.rollout
    deployment = component["Properties"]["DeploymentConfig"]
    assert deployment["RollingUpdatePolicy"] == {
        "MaximumBatchSize": {"Type": "CAPACITY_PERCENT", "Value": rollout.maximum_batch_percent},
        "RollbackMaximumBatchSize": {"Type": "CAPACITY_PERCENT", "Value": rollout.rollback_maximum_batch_percent},
        "WaitIntervalInSeconds": rollout.wait_interval_seconds,
        "MaximumExecutionTimeoutInSeconds": rollout.maximum_execution_timeout_seconds,
    }
    alarms = {r["Properties"]["AlarmName"] for r in _of_type(template, "AWS::CloudWatch::Alarm").values()}
    rollback = {a["AlarmName"] for a in deployment["AutoRollbackConfiguration"]["Alarms"]}
    assert len(rollback) == 3 and rollback <= alarms
    _, endpoint = _one(template, "AWS::SageMaker::Endpoint")
    assert "DeploymentConfig" not in endpoint["Properties"], "promotions do not update the endpoint"


@pytest.mark.parametrize("env", ENVS)
def test_copies_scale_in_to_zero_when_idle_and_out_on_a_request_without_capacity(templates, env):
    template = templates[env]["Serving"]
    resources = template["Resources"]
    target_id, target = _one(template, "AWS::ApplicationAutoScaling::ScalableTarget")
    component_id, component = _one(template, "AWS::SageMaker::InferenceComponent")
    name = component["Properties"]["InferenceComponentName"]
    assert target["Properties"]["ScalableDimension"] == "sagemaker:inference-component:DesiredCopyCount"
    assert target["Properties"]["ResourceId"] == f"inference-component/{name}"
    assert target["Properties"]["MinCapacity"] == 0 and component_id in target["DependsOn"]
    alarms = _of_type(template, "AWS::CloudWatch::Alarm")
    actions = {lid: a["Properties"]["AlarmActions"][0] for lid, a in alarms.items()}
    by_action = {act["Fn::GetAtt"][0]: alarms[lid]["Properties"] for lid, act in actions.items() if "Fn::GetAtt" in act}
    out_id = next(k for k, v in resources.items() if v["Properties"].get("PolicyName", "").endswith("ScaleOutFromZero"))
    in_id = next(k for k, v in resources.items() if v["Properties"].get("PolicyName", "").endswith("ScaleInToZero"))
    out = resources[out_id]["Properties"]["StepScalingPolicyConfiguration"]
    assert out["AdjustmentType"] == "ChangeInCapacity" and out["StepAdjustments"] == [
        {"MetricIntervalLowerBound": 0, "ScalingAdjustment": 1}
    ]
    no_capacity = by_action[out_id]
    assert no_capacity["MetricName"] == "NoCapacityInvocationFailures"
    assert no_capacity["Dimensions"] == [{"Name": "InferenceComponentName", "Value": name}]
    assert no_capacity["Threshold"] == 1 and no_capacity["ComparisonOperator"] == "GreaterThanOrEqualToThreshold"
    idle_minutes = load_served(env).serving.scale_to_zero.idle_minutes
    to_zero = resources[in_id]["Properties"]["StepScalingPolicyConfiguration"]
    assert to_zero["AdjustmentType"] == "ExactCapacity" and to_zero["StepAdjustments"][0]["ScalingAdjustment"] == 0
    idle = by_action[in_id]
    assert all(m["MetricStat"]["Period"] == 60 for m in idle["Metrics"] if "MetricStat" in m), "one minute each"
    assert idle["EvaluationPeriods"] == idle["DatapointsToAlarm"] == idle_minutes
    assert idle["TreatMissingData"] == "breaching" and idle["ComparisonOperator"] == "LessThanThreshold"
    watched = {m["MetricStat"]["Metric"]["MetricName"] for m in idle["Metrics"] if "MetricStat" in m}
    assert watched == {"Invocations", "NoCapacityInvocationFailures"}, "a refused request ends the idle spell"


def _requests(template: dict) -> list[tuple[str, str, str, dict]]:
    """(service, operation, logical id, params): each new resource as the API request CloudFormation makes."""
    resources = template["Resources"]
    found = []
    _, target = _one(template, "AWS::ApplicationAutoScaling::ScalableTarget")
    where = {k: target["Properties"][k] for k in ("ServiceNamespace", "ResourceId", "ScalableDimension")}
    for lid, resource in resources.items():
        props = _unknowns(resource["Properties"])
        kind = resource["Type"]
        if kind == "AWS::SageMaker::InferenceComponent":
            create = {k: v for k, v in props.items() if k != "DeploymentConfig"}
            found.append(("sagemaker", "CreateInferenceComponent", lid, create))
            update = {
                k: props[k] for k in ("InferenceComponentName", "Specification", "RuntimeConfig", "DeploymentConfig")
            }
            found.append(("sagemaker", "UpdateInferenceComponent", lid, update))
        elif kind == "AWS::SageMaker::EndpointConfig":
            found.append(
                ("sagemaker", "CreateEndpointConfig", lid, {"EndpointConfigName": Unknown("generated"), **props})
            )
        elif kind == "AWS::ApplicationAutoScaling::ScalableTarget":
            params = {k: v for k, v in props.items() if k != "Tags"}  # the API takes a map; CloudFormation a list
            found.append(("application-autoscaling", "RegisterScalableTarget", lid, params))
        elif kind == "AWS::ApplicationAutoScaling::ScalingPolicy":
            params = {k: v for k, v in props.items() if k != "ScalingTargetId"}
            found.append(("application-autoscaling", "PutScalingPolicy", lid, {**params, **where}))
        elif kind == "AWS::CloudWatch::Alarm":
            found.append(("cloudwatch", "PutMetricAlarm", lid, props))
    return found


@pytest.mark.parametrize("env", ENVS)
def test_the_new_resources_are_requests_the_apis_accept(templates, env):
    requests = _requests(templates[env]["Serving"])
    operations = {operation for _, operation, _, _ in requests}
    assert {"CreateInferenceComponent", "UpdateInferenceComponent", "PutScalingPolicy"} <= operations
    found = [
        f"{lid}: {line}" for service, op, lid, params in requests for line in limit_violations(service, op, params)
    ]
    assert not found, "\n".join(found)


def test_the_shape_check_refuses_what_the_api_refuses():
    """The check can fail: a component without an endpoint, a copy count below zero, an unknown member."""
    params = {"InferenceComponentName": "c", "RuntimeConfig": {"CopyCount": -1}, "Specification": {"Devices": 1}}
    lines = limit_violations("sagemaker", "CreateInferenceComponent", params)
    assert any("EndpointName: required" in line for line in lines)
    assert any("CopyCount: -1, min 0" in line for line in lines)
    assert any("Specification.Devices: not a member" in line for line in lines)
