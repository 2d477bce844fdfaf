"""Staging (vLLM Neuron backend) deploys to the moto emulator: the endpoint reaches InService.

Emulation, not AWS: moto never starts the container; it shows the templates deploy and wire up.
"""

from __future__ import annotations

from local.emulator import LocalAws

DATA, TRAINING, SERVING = "llm-inf2-staging-Data", "llm-inf2-staging-Training", "llm-inf2-staging-Serving"


def test_staging_deploys_and_the_vllm_endpoint_is_in_service(assemblies):
    with LocalAws.start() as aws:
        aws.bootstrap()
        outputs = aws.deploy(assemblies["staging"].directory, [TRAINING, SERVING])
        assert {aws.status(s) for s in (DATA, TRAINING, SERVING)} == {"CREATE_COMPLETE"}
        sagemaker = aws.client("sagemaker")
        serving = outputs[SERVING]
        endpoint = sagemaker.describe_endpoint(EndpointName=serving["EndpointName"])
        assert endpoint["EndpointStatus"] == "InService"
        model = sagemaker.describe_model(ModelName=serving["ModelName"])
        assert model["PrimaryContainer"]["Environment"]["SM_ON_MODEL"] == "/opt/ml/model"
        parameter = outputs[TRAINING]["CompiledModelParameterName"]
        assert aws.client("ssm").get_parameter(Name=parameter)["Parameter"]["Value"] == "none"
