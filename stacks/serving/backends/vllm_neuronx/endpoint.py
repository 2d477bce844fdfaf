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
from collections.abc import Sequence

from aws_cdk import Token
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_sns as sns
from constructs import Construct, IDependable

from stacks.config.serving import ServingConfig
from stacks.serving.hosting import llm_hosting
from stacks.shared.placement import Placement
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

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        serving: ServingConfig,
        image_uri: str,
        model_uri: str,
        execution_role: iam.IRole,
        role_policies: Sequence[IDependable],
        kms_key: kms.IKey,
        alarm_topic: sns.ITopic,
        data_capture_destination: str | None,
        isolated_placement: Placement | None = None,
        compiled_graph_uri: str | None = None,
    ) -> None:
        """`compiled_graph_uri` is always None: the config refuses compiled_graph_prefix for this backend."""
        super().__init__(scope, construct_id)
        self.model_asset = None  # the weights and tokenizer come mounted from model_uri
        placement = isolated_placement
        container = ContainerSpec(
            image_uri=image_uri,
            environment=vllm_environment(serving),
            model_data_source_uri=model_uri,
            # Everything is mounted from S3 (weights, tokenizer, compiled graphs): the container needs no network.
            network_isolation=True,
            vpc_subnet_ids=placement.subnet_ids if placement else (),
            vpc_security_group_ids=placement.security_group_ids if placement else (),
        )
        self.hosting = llm_hosting(
            self,
            serving=serving,
            container=container,
            revision=revision(serving, image_uri=image_uri),
            execution_role=execution_role,
            role_policies=role_policies,
            kms_key=kms_key,
            alarm_topic=alarm_topic,
            data_capture_destination=data_capture_destination,
            inference_ami_version=NEURON_AMI,
        )
        self.endpoint_name = self.hosting.endpoint_name
