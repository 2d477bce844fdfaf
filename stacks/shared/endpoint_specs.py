"""What an endpoint runs (the container) and on what (the variant): the props of SageMakerEndpoint and of the
inference component it may host instead of a model on the variant."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from aws_cdk import aws_sagemaker as sagemaker


@dataclass(frozen=True)
class ContainerSpec:
    """What the Model runs: the image, its environment, where the weights come from, its network."""

    image_uri: str
    environment: Mapping[str, str]
    model_data_url: str | None = None  # a model.tar.gz
    model_data_source_uri: str | None = None  # an uncompressed S3 prefix SageMaker mounts at /opt/ml/model
    network_isolation: bool = False
    vpc_subnet_ids: Sequence[str] = ()
    vpc_security_group_ids: Sequence[str] = ()


@dataclass(frozen=True)
class VariantSpec:
    """The one production variant: instance type and count, volume, the start-up and download time limits."""

    instance_type: str
    initial_instance_count: int
    instance_vcpus: int  # scales the CPU alarm threshold
    volume_size_gb: int | None
    startup_health_check_timeout_seconds: int
    model_data_download_timeout_seconds: int
    inference_ami_version: str | None = None  # e.g. the Neuron driver AMI the vLLM Neuron container needs


def mounted_model_source(uri: str | None) -> sagemaker.CfnModel.ModelDataSourceProperty | None:
    """ContainerSpec.model_data_source_uri as the Model's ModelDataSource: an uncompressed S3 prefix, so a
    model the workflow wrote as files needs no model.tar.gz."""
    if uri is None:
        return None
    return sagemaker.CfnModel.ModelDataSourceProperty(
        s3_data_source=sagemaker.CfnModel.S3DataSourceProperty(
            s3_uri=uri, s3_data_type="S3Prefix", compression_type="None"
        )
    )
