"""Data + Pruning from the synthesized dev templates into the local emulator (moto on 127.0.0.1).

Emulation, not AWS: moto creates the resources and records executions but runs no `.sync` task, alarm or
autoscaling, and never starts a container.
"""

from __future__ import annotations

import json

import pytest

from local.emulator import LocalAws

DATA, PRUNING = "llm-inf2-dev-Data", "llm-inf2-dev-Pruning"


@pytest.fixture(scope="module")
def deployed(assemblies):
    with LocalAws.start() as aws:
        aws.bootstrap()
        outputs = aws.deploy(assemblies["dev"].directory, [PRUNING])
        yield aws, outputs


def test_stacks_reach_create_complete(deployed):
    aws, outputs = deployed
    assert aws.status(DATA) == "CREATE_COMPLETE"
    assert aws.status(PRUNING) == "CREATE_COMPLETE"
    assert {"StateMachineArn", "TopicArn", "ModelParameterName", "BaseEndpointName", "PrunedEndpointName"} <= set(
        outputs[PRUNING]
    )


def test_state_machine_is_the_synthesized_one(deployed):
    aws, outputs = deployed
    machine = aws.client("stepfunctions").describe_state_machine(stateMachineArn=outputs[PRUNING]["StateMachineArn"])
    states = json.loads(machine["definition"])["States"]
    assert states["Tune"]["Resource"] == "arn:aws:states:::sagemaker:createHyperParameterTuningJob.sync"
    bucket = outputs[DATA]["ArtifactBucketName"]
    assert states["SelectPareto"]["Parameters"]["HyperParameters"]["output-s3-uri.$"] == (
        f"States.Format('s3://{bucket}/pruning/{{}}/', $.run.name)"
    )
    parameter = aws.client("ssm").get_parameter(Name=outputs[PRUNING]["ModelParameterName"])["Parameter"]
    assert parameter["Value"] == "none"


def test_both_endpoints_serve_their_model(deployed):
    aws, outputs = deployed
    sagemaker = aws.client("sagemaker")
    bucket = outputs[DATA]["ArtifactBucketName"]
    keys = set()
    for name in ("BaseEndpointName", "PrunedEndpointName"):
        endpoint = sagemaker.describe_endpoint(EndpointName=outputs[PRUNING][name])
        assert endpoint["EndpointStatus"] == "InService"
        config = sagemaker.describe_endpoint_config(EndpointConfigName=endpoint["EndpointConfigName"])
        (variant,) = config["ProductionVariants"]
        model = sagemaker.describe_model(ModelName=variant["ModelName"])
        url = model["PrimaryContainer"]["ModelDataUrl"]
        assert url.startswith(f"s3://{bucket}/pruning/") and url.endswith("/model.tar.gz")
        keys.add(url)
    assert len(keys) == 2, "base and pruned serve different models"
