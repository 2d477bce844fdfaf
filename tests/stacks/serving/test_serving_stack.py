"""The Serving stack's template: model, endpoint config, guarded endpoint updates, scaling, alarms, tarball."""

from __future__ import annotations

import gzip
import io
import tarfile
from pathlib import Path

import pytest
from aws_cdk.assertions import Match, Template

from stacks.serving.backends.lmi_neuronx.config import render_properties
from tests.synth import SERVED, load_served

ENVS = ("dev", "prod")
EXPECTED = {  # env: (instance type, initial count, min, max, tp, served prefix: the version's compiled model)
    "dev": ("ml.inf2.xlarge", 1, 1, 2, 2, SERVED["dev"][4]),
    "prod": ("ml.inf2.24xlarge", 2, 2, 6, 8, SERVED["prod"][4]),
}


def _one(template: dict, resource_type: str) -> tuple[str, dict]:
    found = [(k, v) for k, v in template["Resources"].items() if v["Type"] == resource_type]
    assert len(found) == 1, f"expected one {resource_type}, got {len(found)}"
    return found[0]


def _config(env):
    return load_served(env).serving


@pytest.mark.parametrize("env", ENVS)
def test_model_reads_the_pinned_prefix_through_the_environment(templates, env):
    template = templates[env]["Serving"]
    model_id, model = _one(template, "AWS::SageMaker::Model")
    props = model["Properties"]
    assert "ModelName" not in props, "generated names let CloudFormation replace the model"
    container = props["PrimaryContainer"]
    _, region, column = container["Image"]["Fn::FindInMap"]
    assert region == {"Ref": "AWS::Region"} and column == "LmiNeuronxUri"
    prefix = EXPECTED[env][5]
    if env == "prod":  # isolated mode mounts the prefix (tests/stacks/network/test_network_isolation.py)
        joined = container["ModelDataSource"]["S3DataSource"]["S3Uri"]["Fn::Join"][1]
        assert "OPTION_MODEL_ID" not in container["Environment"] and "ModelDataUrl" not in container
    else:
        joined = container["Environment"]["OPTION_MODEL_ID"]["Fn::Join"][1]
        assert "cdk-hnb659fds-assets" in container["ModelDataUrl"]["Fn::Sub"]
    assert joined[0] == "s3://" and "ArtifactBucket" in joined[1]["Fn::ImportValue"] and joined[2] == f"/{prefix}"
    assert "OPTION_COMPILED_GRAPH_PATH" not in container["Environment"], "the compiled model is the model"
    policy_id, _ = _one(template, "AWS::IAM::ManagedPolicy")
    assert model["DependsOn"] == [policy_id], "CreateModel checks ECR pull rights: the policy must exist first"


@pytest.mark.parametrize("env", ENVS)
def test_endpoint_config_variant_timeouts_volume_and_kms(templates, env):
    serving = _config(env)
    _, config = _one(templates[env]["Serving"], "AWS::SageMaker::EndpointConfig")
    props = config["Properties"]
    assert "EndpointConfigName" not in props
    assert "ArtifactKey" in props["KmsKeyId"]["Fn::ImportValue"]
    (variant,) = props["ProductionVariants"]
    instance_type, count, *_ = EXPECTED[env]
    assert variant["VariantName"] == "AllTraffic"
    assert variant["InstanceType"] == instance_type and variant["InitialInstanceCount"] == count
    assert variant["ContainerStartupHealthCheckTimeoutInSeconds"] >= serving.lmi.model_loading_timeout
    assert 60 <= variant["ModelDataDownloadTimeoutInSeconds"] <= 3600
    assert variant["VolumeSizeInGB"] == serving.volume_size_gb
    if env == "prod":
        capture = props["DataCaptureConfig"]
        assert capture["EnableCapture"] is True and capture["InitialSamplingPercentage"] == 10
        assert capture["KmsKeyId"] == props["KmsKeyId"]
        assert capture["DestinationS3Uri"]["Fn::Join"][1][-1] == "/data-capture/prod/"
    else:
        assert "DataCaptureConfig" not in props


# dev scales to zero: its rollout and scaling are the inference component's (test_scale_to_zero.py).
@pytest.mark.parametrize("env", ["prod"])
def test_endpoint_rolls_out_with_auto_rollback_on_its_alarms_and_keeps_scaled_count(templates, env):
    template = templates[env]["Serving"]
    _, endpoint = _one(template, "AWS::SageMaker::Endpoint")
    props = endpoint["Properties"]
    assert "EndpointName" not in props
    assert props["RetainAllVariantProperties"] is True
    deployment = props["DeploymentConfig"]
    rolling = deployment["RollingUpdatePolicy"]
    assert rolling["MaximumBatchSize"]["Type"] == "CAPACITY_PERCENT"
    assert rolling["MaximumExecutionTimeoutInSeconds"] >= _config(env).container_startup_health_check_timeout_seconds
    alarm_names = {
        r["Properties"]["AlarmName"] for r in template["Resources"].values() if r["Type"] == "AWS::CloudWatch::Alarm"
    }
    rollback = {a["AlarmName"] for a in deployment["AutoRollbackConfiguration"]["Alarms"]}
    assert rollback <= alarm_names and len(rollback) == 3
    assert all(name.startswith(f"llm-inf2-{env}-Serving-") for name in rollback)
    tags = {t["Key"]: t["Value"] for t in props["Tags"]}
    _, config = _one(template, "AWS::SageMaker::EndpointConfig")
    assert tags["model-revision"] == {t["Key"]: t["Value"] for t in config["Properties"]["Tags"]}["model-revision"]


@pytest.mark.parametrize("env", ["prod"])
def test_autoscaling_tracks_invocations_per_instance(templates, env):
    template = Template.from_json(templates[env]["Serving"])
    _, _, low, high, *_ = EXPECTED[env]
    scaling = _config(env).autoscaling
    template.has_resource_properties(
        "AWS::ApplicationAutoScaling::ScalableTarget",
        {
            "MinCapacity": low,
            "MaxCapacity": high,
            "ServiceNamespace": "sagemaker",
            "ScalableDimension": "sagemaker:variant:DesiredInstanceCount",
            "ResourceId": {
                "Fn::Join": [
                    "",
                    ["endpoint/", {"Fn::GetAtt": [Match.any_value(), "EndpointName"]}, "/variant/AllTraffic"],
                ]
            },
        },
    )
    template.has_resource_properties(
        "AWS::ApplicationAutoScaling::ScalingPolicy",
        {
            "PolicyType": "TargetTrackingScaling",
            "TargetTrackingScalingPolicyConfiguration": {
                "PredefinedMetricSpecification": {"PredefinedMetricType": "SageMakerVariantInvocationsPerInstance"},
                "TargetValue": scaling.target_invocations_per_instance,
                "ScaleInCooldown": scaling.scale_in_cooldown_seconds,
                "ScaleOutCooldown": scaling.scale_out_cooldown_seconds,
            },
        },
    )
    assert not template.find_resources(
        "AWS::IAM::Role",
        {
            "Properties": {
                "AssumeRolePolicyDocument": {
                    "Statement": [
                        Match.object_like({"Principal": {"Service": "application-autoscaling.amazonaws.com"}})
                    ]
                }
            }
        },
    ), "the service-linked role is used; no extra scaling role"


def test_alarms_notify_the_encrypted_topic(templates):
    template = Template.from_json(templates["dev"]["Serving"])
    alarms = template.find_resources("AWS::CloudWatch::Alarm")
    by_suffix = {r["Properties"]["AlarmName"].rsplit("-", 1)[-1]: r["Properties"] for r in alarms.values()}
    scaling = {
        by_suffix.pop(name)["AlarmActions"][0]["Fn::GetAtt"][1] for name in ("Idle", "NoCapacityInvocationFailures")
    }
    assert scaling == {"Arn"}, "the scale-to-zero alarms run scaling policies, not the topic"
    assert set(by_suffix) == {
        "ModelLatencyP90",
        "Invocation5XXErrors",
        "Invocation4XXErrorRate",
        "CPUUtilization",
        "MemoryUtilization",
    }
    topic_id, _ = _one(templates["dev"]["Serving"], "AWS::SNS::Topic")
    for props in by_suffix.values():
        assert props["AlarmActions"] == [{"Ref": topic_id}] and props["OKActions"] == [{"Ref": topic_id}]
    latency = by_suffix["ModelLatencyP90"]
    assert latency["ExtendedStatistic"] == "p90" and latency["Threshold"] == 20000 * 1000  # microseconds
    assert by_suffix["CPUUtilization"]["Namespace"] == "/aws/sagemaker/Endpoints"
    assert by_suffix["CPUUtilization"]["Threshold"] == 90 * 4  # 90% of the 4 vCPUs of an inf2.xlarge
    rate = by_suffix["Invocation4XXErrorRate"]["Metrics"]
    assert {m["Id"] for m in rate} >= {"errors", "invocations"}
    template.has_resource_properties("AWS::SNS::Topic", {"KmsMasterKeyId": Match.any_value()})
    template.resource_count_is("AWS::CloudWatch::Dashboard", 1)


def test_outputs_and_execution_role_scope(templates):
    serving = templates["dev"]["Serving"]
    assert {"EndpointName", "DashboardName", "DashboardUrl", "EndpointConfigName", "ModelName"} <= set(
        serving["Outputs"]
    )
    _, policy = _one(serving, "AWS::IAM::ManagedPolicy")
    statements = {s["Sid"]: s for s in policy["Properties"]["PolicyDocument"]["Statement"]}
    read = statements["ReadPinnedModel"]["Resource"]
    reads = read if isinstance(read, list) else [read]
    assert [r["Fn::Join"][1][-1] for r in reads] == [f"/{SERVED['dev'][4]}*"]
    assert statements["ListPinnedModelPrefixes"]["Condition"] == {"StringLike": {"s3:prefix": [f"{SERVED['dev'][4]}*"]}}
    assert "FindInMap" in str(statements["PullServingImage"]["Resource"])
    assert all("*" not in str(s["Action"]) for s in statements.values()), "no wildcard actions"
    assert "AWS::IAM::Policy" not in {r["Type"] for r in serving["Resources"].values()}, "no inline policies"


@pytest.mark.parametrize("env", ENVS)
def test_tarball_holds_exactly_the_rendered_serving_properties(assemblies, templates, env):
    _, model = _one(templates[env]["Serving"], "AWS::SageMaker::Model")
    if "ModelDataSource" in model["Properties"]["PrimaryContainer"]:  # isolated: the same settings as OPTION_*
        from stacks.config.serving_properties import as_environment

        environment = model["Properties"]["PrimaryContainer"]["Environment"]
        rendered = as_environment(render_properties(_config(env)))
        assert {k: environment[k] for k in rendered} == rendered
        assert environment["OPTION_TENSOR_PARALLEL_DEGREE"] == str(EXPECTED[env][4])
        return
    object_key = model["Properties"]["PrimaryContainer"]["ModelDataUrl"]["Fn::Sub"].rsplit("/", 1)[-1]
    asset_hash = object_key.split(".", 1)[0]
    tarball = Path(assemblies[env].directory) / f"asset.{asset_hash}.tar.gz"
    with tarfile.open(fileobj=io.BytesIO(gzip.decompress(tarball.read_bytes()))) as tar:
        assert tar.getnames() == ["serving.properties"]
        shipped = tar.extractfile("serving.properties").read().decode()
    assert shipped == render_properties(_config(env))
    settings = dict(line.split("=", 1) for line in shipped.splitlines() if line and not line.startswith("#"))
    assert settings["engine"] == "Python" and settings["option.entryPoint"] == "djl_python.transformers_neuronx"
    assert settings["option.tensor_parallel_degree"] == str(EXPECTED[env][4])
    assert settings["option.rolling_batch"] == "auto" and settings["option.batch_size"] == "1"
    assert "option.model_id" not in settings and "option.compiled_graph_path" not in settings


def test_blue_green_is_selectable_and_the_generic_construct_is_reusable():
    """The generic endpoint construct, built alone (as another model's endpoint would use it)."""
    import dataclasses

    from aws_cdk import App, Stack
    from aws_cdk import aws_iam as iam
    from aws_cdk import aws_kms as kms
    from aws_cdk import aws_sns as sns

    from stacks.config.endpoint import AlarmConfig, AutoscalingConfig, DataCaptureConfig, RolloutConfig
    from stacks.shared.sagemaker_endpoint import ContainerSpec, SageMakerEndpoint, VariantSpec

    stack = Stack(App(), "Encoder")
    role = iam.Role(stack, "Role", assumed_by=iam.ServicePrincipal("sagemaker.amazonaws.com"))
    rollout = dataclasses.replace(RolloutConfig(), strategy="blue_green", traffic="canary", canary_percent=20)
    SageMakerEndpoint(
        stack,
        "Encoder",
        container=ContainerSpec(
            image_uri="123456789012.dkr.ecr.us-east-1.amazonaws.com/hf:1",
            model_data_url="s3://b/m.tgz",
            environment={"HF_TASK": "feature-extraction"},
        ),
        variant=VariantSpec(
            instance_type="ml.c6i.xlarge",
            initial_instance_count=1,
            instance_vcpus=4,
            volume_size_gb=None,
            startup_health_check_timeout_seconds=600,
            model_data_download_timeout_seconds=600,
        ),
        execution_role=role,
        role_policies=[],
        revision="r1",
        kms_key=kms.Key(stack, "Key"),
        rollout=rollout,
        autoscaling=AutoscalingConfig(),
        alarms=AlarmConfig(),
        alarm_topic=sns.Topic(stack, "Topic"),
        data_capture=DataCaptureConfig(),
        data_capture_destination=None,
    )
    template = Template.from_stack(stack)
    template.has_resource_properties(
        "AWS::SageMaker::Endpoint",
        {
            "RetainAllVariantProperties": True,
            "DeploymentConfig": {
                "AutoRollbackConfiguration": {"Alarms": Match.any_value()},
                "BlueGreenUpdatePolicy": {
                    "TrafficRoutingConfiguration": {
                        "Type": "CANARY",
                        "CanarySize": {"Type": "CAPACITY_PERCENT", "Value": 20},
                        "WaitIntervalInSeconds": rollout.wait_interval_seconds,
                    },
                    "TerminationWaitInSeconds": rollout.termination_wait_seconds,
                },
            },
        },
    )
    template.has_resource_properties(
        "AWS::SageMaker::EndpointConfig",
        {
            "ProductionVariants": [Match.object_like({"InstanceType": "ml.c6i.xlarge", "VariantName": "AllTraffic"})],
        },
    )
    template.resource_count_is("AWS::CloudWatch::Alarm", 5)
    template.resource_count_is("AWS::ApplicationAutoScaling::ScalableTarget", 1)
