"""The Hugging Face vLLM Neuron container (optimum-neuron) on ml.inf2, on top of the generic SageMakerEndpoint.

The compiled model (`optimum-cli export neuron` output: config.json, neuron_config.json, sharded weights,
tokenizer) is mounted uncompressed at /opt/ml/model (ModelDataSource, S3Prefix). The entrypoint turns every
`SM_ON_<NAME>` variable into `--<name>` for `optimum-cli neuron serve`, which refuses a batch size, sequence
length or TP degree other than the compiled ones: all three come from `serving.neuron`, the block the
Training workflow's compile step exports with, so they cannot diverge. The model runs network-isolated in every
environment (nothing to download; not verified on AWS that `serve` never looks up the hub cache).
"""

from __future__ import annotations

import hashlib

from aws_cdk import Token
from constructs import Construct

from stacks.config.serving import ServingConfig
from stacks.serving.hosting import EndpointProps, llm_hosting
from stacks.shared.sagemaker_endpoint import ContainerSpec

from .config import sm_on_environment

MODEL_DIR = "/opt/ml/model"
NEURON_AMI = "al2-ami-sagemaker-inference-neuron-2"  # Neuron driver + runtime the container expects


def vllm_environment(serving: ServingConfig) -> dict[str, str]:
    """`optimum-cli neuron serve` flags as SM_ON_* variables: the mounted model and its compiled shape."""
    return sm_on_environment(model=MODEL_DIR, served_model_name=serving.model_name, neuron=serving.neuron)


def revision(serving: ServingConfig, *, image_uri: str) -> str:
    """A short fingerprint of what the model serves: the compiled prefix, its shape, the image choice."""
    image = image_uri if not Token.is_unresolved(image_uri) else serving.image_name
    parts = [serving.backend, serving.model_prefix, serving.neuron.compiled_folder, serving.model_name, image]
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:12]


class VllmNeuronxEndpoint(Construct):
    """One compiled model served by vLLM Neuron: `hosting` holds the endpoint resources (no tarball asset)."""

    def __init__(self, scope: Construct, construct_id: str, *, props: EndpointProps) -> None:
        super().__init__(scope, construct_id)
        self.model_asset = None  # the weights and tokenizer come mounted from model_uri
        serving = props.serving
        container = ContainerSpec(
            image_uri=props.image_uri,
            environment=vllm_environment(serving),
            model_data_source_uri=props.model_uri,
            # Everything is mounted from S3 (weights, tokenizer, compiled graphs): the container needs no network.
            network_isolation=True,
        )
        self.hosting = llm_hosting(
            self,
            props,
            container=container,
            revision=revision(serving, image_uri=props.image_uri),
            inference_ami_version=NEURON_AMI,
        )
        self.endpoint_name = self.hosting.endpoint_name
