"""Data + Serving deploy to the moto emulator; promoting another version updates the component in place.

Emulation, not AWS: moto skips alarms and autoscaling and never starts a container, but it runs the
real templates through CloudFormation (create, update, replacement of named-by-CloudFormation
resources), so it shows the update path a promotion takes. dev scales to zero: its model is an inference
component (the emulator's, local/emulator/inference_components.py) on an endpoint whose variant has none.
"""

from __future__ import annotations

import pytest

from local.emulator import LocalAws
from tools.invoke import endpoint_from_stack, target_from_stack

DATA, SERVING = "llm-inf2-dev-Data", "llm-inf2-dev-Serving"
PROMOTED_PREFIX = "models/promoted-job/merged/"
# dev serves LMI's partition output: the compiled folder names its shape and compiler
PROMOTED_COMPILED = "models/promoted-job/neuron/tp2-np2048-bs4-fp16-neuronx-cc-2.15.141.0/promoted-n-0/output/model/"
PROMOTED_VERSION = "arn:aws:sagemaker:us-east-1:123456789012:model-package/llminf2devdata-models/4"


@pytest.fixture(scope="module")
def promoted_assembly(tmp_path_factory):
    """The dev app serving another version (its lock's model_prefix): what a promotion synthesizes."""
    from tests.synth import load_served, synth

    promoted = load_served(
        "dev", model_prefix=PROMOTED_PREFIX, compiled_prefix=PROMOTED_COMPILED, model_package_arn=PROMOTED_VERSION
    )
    return synth(promoted, tmp_path_factory.mktemp("cdk-dev-promoted"))


def _endpoint(aws, outputs):
    sagemaker = aws.client("sagemaker")
    endpoint = sagemaker.describe_endpoint(EndpointName=outputs["EndpointName"])
    config = sagemaker.describe_endpoint_config(EndpointConfigName=endpoint["EndpointConfigName"])
    # By the stack output: on updates moto resolves the config's GetAtt ModelName to a name it never
    # creates (an emulator bug; CloudFormation passes the replacement's name).
    model = sagemaker.describe_model(ModelName=outputs["ModelName"])
    return endpoint, config, model


def _has_botocore_required_members(client, operation: str, answer: dict) -> None:
    shape = client.meta.service_model.operation_model(operation).output_shape
    missing = set(shape.required_members) - set(answer)
    assert not missing, f"{operation} lacks {missing}"
    assert set(answer) - {"ResponseMetadata"} <= set(shape.members)


def test_a_missing_inference_component_is_refused_as_sagemaker_refuses_it():
    with LocalAws.start() as aws:
        sagemaker = aws.client("sagemaker")
        with pytest.raises(sagemaker.exceptions.ClientError, match="ValidationException.*Could not find"):
            sagemaker.describe_inference_component(InferenceComponentName="absent")
        assert sagemaker.list_inference_components()["InferenceComponents"] == []


def test_deploy_then_promote_updates_the_endpoint_in_place(assemblies, promoted_assembly):
    with LocalAws.start() as aws:
        aws.bootstrap()
        outputs = aws.deploy(assemblies["dev"].directory, [SERVING])
        assert aws.status(DATA) == "CREATE_COMPLETE" and aws.status(SERVING) == "CREATE_COMPLETE"
        serving = outputs[SERVING]
        bucket = outputs[DATA]["ArtifactBucketName"]
        endpoint, config, model = _endpoint(aws, serving)
        assert endpoint["EndpointStatus"] == "InService"
        variant = config["ProductionVariants"][0]
        assert "ModelName" not in variant, "the model is the component's, not the variant's"
        assert variant["InstanceType"] == "ml.inf2.xlarge" and variant["VariantName"] == "AllTraffic"
        sagemaker = aws.client("sagemaker")
        (listed,) = sagemaker.list_inference_components(EndpointNameEquals=serving["EndpointName"])[
            "InferenceComponents"
        ]
        component = sagemaker.describe_inference_component(InferenceComponentName=listed["InferenceComponentName"])
        _has_botocore_required_members(sagemaker, "DescribeInferenceComponent", component)
        assert component["EndpointArn"] == endpoint["EndpointArn"] and component["VariantName"] == "AllTraffic"
        assert component["Specification"]["ModelName"] == serving["ModelName"]
        assert component["RuntimeConfig"]["CurrentCopyCount"] == 1
        assert component["InferenceComponentStatus"] == "InService"
        # tools/invoke.py names the component from the stack outputs, as a component endpoint requires
        name = component["InferenceComponentName"]
        assert target_from_stack(aws.client("cloudformation"), SERVING) == (serving["EndpointName"], name)
        from tests.synth import lock_document

        served = lock_document("dev")["compiled_prefix"]
        assert model["PrimaryContainer"]["Environment"]["OPTION_MODEL_ID"] == f"s3://{bucket}/{served}"
        model_tarball = model["PrimaryContainer"]["ModelDataUrl"]
        s3 = aws.client("s3")
        s3.put_object(Bucket=bucket, Key=f"{PROMOTED_COMPILED}config.json", Body=b"{}")
        objects_before = {o["Key"]: o["ETag"] for o in s3.list_objects_v2(Bucket=bucket)["Contents"]}
        data_resources = {k: v["PhysicalResourceId"] for k, v in aws.resources(DATA).items()}

        promoted = aws.deploy(promoted_assembly.directory, [SERVING])[SERVING]

        assert aws.status(SERVING) == "UPDATE_COMPLETE"
        assert aws.status(DATA) == "CREATE_COMPLETE", "a promotion must not touch the data stack"
        assert {k: v["PhysicalResourceId"] for k, v in aws.resources(DATA).items()} == data_resources
        assert {o["Key"]: o["ETag"] for o in s3.list_objects_v2(Bucket=bucket)["Contents"]} == objects_before
        new_endpoint, new_config, new_model = _endpoint(aws, promoted)
        assert promoted["EndpointName"] == serving["EndpointName"], "same endpoint, updated in place"
        assert new_endpoint["EndpointArn"] == endpoint["EndpointArn"]
        assert new_endpoint["EndpointStatus"] == "InService"
        assert new_config["EndpointConfigName"] == config["EndpointConfigName"], "the endpoint is not touched"
        assert promoted["ModelName"] != serving["ModelName"], "the model is replaced, not edited"
        updated = sagemaker.describe_inference_component(InferenceComponentName=name)
        assert updated["InferenceComponentArn"] == component["InferenceComponentArn"], "the component is updated"
        assert updated["Specification"]["ModelName"] == promoted["ModelName"]
        assert updated["LastModifiedTime"] >= component["LastModifiedTime"]
        # UpdateInferenceComponent with the rolling policy and alarm rollback
        deployment = updated["LastDeploymentConfig"]
        assert deployment["RollingUpdatePolicy"]["MaximumBatchSize"]["Type"] == "CAPACITY_PERCENT"
        assert len(deployment["AutoRollbackConfiguration"]["Alarms"]) == 3
        assert new_model["PrimaryContainer"]["Environment"]["OPTION_MODEL_ID"] == f"s3://{bucket}/{PROMOTED_COMPILED}"
        assert new_model["PrimaryContainer"]["ModelDataUrl"] == model_tarball, "same serving.properties tarball"
        # tools/invoke.py finds the endpoint the same way (stack outputs).
        assert endpoint_from_stack(aws.client("cloudformation"), SERVING) == serving["EndpointName"]
