"""The LMI (DJL Serving) NeuronX container on ml.inf2, on top of the generic SageMakerEndpoint.

LMI-only parts: the rendered serving.properties shipped as a deterministic model.tar.gz, the
weights read from the pinned S3 prefix through OPTION_MODEL_ID (never through serving.properties,
which would win over the environment), an optional precompiled Neuron graph, inf2 sizing.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

from aws_cdk import Token
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_s3_assets as s3_assets
from aws_cdk import aws_sns as sns
from constructs import Construct, IDependable

from ..assets import build_content_addressed
from ..config.serving import ServingConfig
from ..config.serving_properties import PROPERTIES, template_path
from .sagemaker_endpoint import SageMakerEndpoint


def model_environment(*, model_uri: str, compiled_graph_uri: str | None) -> dict[str, str]:
    """The container environment: where the weights (and precompiled graph) live."""
    environment = {"OPTION_MODEL_ID": model_uri}
    if compiled_graph_uri is not None:
        environment["OPTION_COMPILED_GRAPH_PATH"] = compiled_graph_uri
    return environment


def revision(serving: ServingConfig, *, image_uri: str, tarball: str) -> str:
    """A short fingerprint of what the model serves: prefixes, image choice, the tarball's content hash."""
    image = image_uri if not Token.is_unresolved(image_uri) else serving.image
    parts = [serving.model_prefix, serving.compiled_graph_prefix or "", image, tarball]
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:12]


class LmiNeuronxEndpoint(Construct):
    """One merged model served by LMI NeuronX: `model_asset` is the tarball, `hosting` the endpoint resources."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        serving: ServingConfig,
        image_uri: str,
        model_uri: str,
        compiled_graph_uri: str | None,
        execution_role: iam.IRole,
        role_policies: Sequence[IDependable],
        kms_key: kms.IKey,
        alarm_topic: sns.ITopic,
        data_capture_destination: str | None,
    ) -> None:
        super().__init__(scope, construct_id)
        self.serving_properties = serving.render_properties().encode("utf-8")
        tarball = build_content_addressed(
            template_path(serving.model_name).parent, extra_files={PROPERTIES: self.serving_properties}
        )
        self.model_asset = s3_assets.Asset(self, "ModelTarball", path=str(tarball))
        self.hosting = SageMakerEndpoint(
            self,
            "Hosting",
            image_uri=image_uri,
            model_data_url=self.model_asset.s3_object_url,
            environment=model_environment(model_uri=model_uri, compiled_graph_uri=compiled_graph_uri),
            execution_role=execution_role,
            role_policies=role_policies,
            revision=revision(serving, image_uri=image_uri, tarball=tarball.name),
            instance_type=serving.instance_type,
            initial_instance_count=serving.initial_instance_count,
            instance_vcpus=serving.inf2.vcpus,
            volume_size_gb=serving.volume_size_gb,
            startup_health_check_timeout_seconds=serving.container_startup_health_check_timeout_seconds,
            model_data_download_timeout_seconds=serving.model_data_download_timeout_seconds,
            kms_key=kms_key,
            rollout=serving.rollout,
            autoscaling=serving.autoscaling,
            alarms=serving.alarms,
            alarm_topic=alarm_topic,
            data_capture=serving.data_capture,
            data_capture_destination=data_capture_destination,
        )
        self.endpoint_name = self.hosting.endpoint_name
