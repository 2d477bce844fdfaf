"""The LMI (DJL Serving) NeuronX container on ml.inf2, on top of the generic SageMakerEndpoint.

LMI-only parts: the rendered serving.properties shipped as a deterministic model.tar.gz, the
weights read from the pinned S3 prefix through OPTION_MODEL_ID (never through serving.properties,
which would win over the environment), an optional precompiled Neuron graph, inf2 sizing.

Isolated mode (`isolated_placement`): the model runs network-isolated in the VPC and SageMaker mounts the
pinned prefix at /opt/ml/model (ModelDataSource, uncompressed); ModelDataSource excludes the tarball, so
serving.properties travels as the equivalent OPTION_<KEY> environment variables.
"""

from __future__ import annotations

import hashlib

from aws_cdk import Token
from aws_cdk import aws_s3_assets as s3_assets
from constructs import Construct

from stacks.config.serving import ServingConfig
from stacks.config.serving_properties import PROPERTIES, as_environment
from stacks.serving.hosting import EndpointProps, llm_hosting
from stacks.shared.assets import build_content_addressed
from stacks.shared.sagemaker_endpoint import ContainerSpec

from .config import render_properties

MODEL_DIR = "/opt/ml/model/"


def isolated_environment(properties: str, *, model_prefix: str, compiled_graph_prefix: str | None) -> dict[str, str]:
    """The container environment when the model is mounted at /opt/ml/model (LMI's default model location)."""
    environment = as_environment(properties)
    if compiled_graph_prefix is not None:
        environment["OPTION_COMPILED_GRAPH_PATH"] = MODEL_DIR + compiled_graph_prefix.removeprefix(model_prefix)
    return environment


def model_environment(*, model_uri: str, compiled_graph_uri: str | None) -> dict[str, str]:
    """The container environment: where the weights (and precompiled graph) live."""
    environment = {"OPTION_MODEL_ID": model_uri}
    if compiled_graph_uri is not None:
        environment["OPTION_COMPILED_GRAPH_PATH"] = compiled_graph_uri
    return environment


def revision(serving: ServingConfig, *, image_uri: str, tarball: str) -> str:
    """A short fingerprint of what the model serves: prefixes, image choice, the tarball's content hash."""
    image = image_uri if not Token.is_unresolved(image_uri) else serving.image_name
    parts = [serving.model_prefix, serving.compiled_graph_prefix or "", image, tarball]
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:12]


class LmiNeuronxEndpoint(Construct):
    """One merged model served by LMI NeuronX: `model_asset` is the tarball, `hosting` the endpoint resources."""

    def __init__(self, scope: Construct, construct_id: str, *, props: EndpointProps) -> None:
        super().__init__(scope, construct_id)
        serving = props.serving
        self.serving_properties = render_properties(serving).encode("utf-8")
        # the rendered file alone: its template lives beside this module, which must not ship
        tarball = build_content_addressed(None, extra_files={PROPERTIES: self.serving_properties})
        isolated = props.isolated_placement is not None
        # Isolated: no tarball (ModelDataSource and ModelDataUrl exclude each other); its hash still fingerprints.
        self.model_asset = None if isolated else s3_assets.Asset(self, "ModelTarball", path=str(tarball))
        if isolated:
            environment = isolated_environment(
                self.serving_properties.decode("utf-8"),
                model_prefix=serving.model_prefix,
                compiled_graph_prefix=serving.compiled_graph_prefix,
            )
        else:
            environment = model_environment(model_uri=props.model_uri, compiled_graph_uri=props.compiled_graph_uri)
        container = ContainerSpec(
            image_uri=props.image_uri,
            environment=environment,
            model_data_url=None if self.model_asset is None else self.model_asset.s3_object_url,
            model_data_source_uri=props.model_uri if isolated else None,
            network_isolation=isolated,
        )
        self.hosting = llm_hosting(
            self,
            props,
            container=container,
            revision=revision(serving, image_uri=props.image_uri, tarball=tarball.name),
        )
        self.endpoint_name = self.hosting.endpoint_name
