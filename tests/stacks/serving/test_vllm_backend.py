"""The vLLM Neuron backend (config/staging.yaml) on the session's synthesized templates, and its promotion."""

from __future__ import annotations

from pathlib import Path

import pytest

from stacks.serving.backends.vllm_neuronx.endpoint import NEURON_AMI
from tests.stacks.training.test_training_stack import resources_of
from tests.synth import load_served, synth
from tools import review_diff

STAGING = load_served("staging")


def _one(template: dict, resource_type: str) -> dict:
    (resource,) = resources_of(template, resource_type).values()
    return resource["Properties"]


def test_model_mounts_the_compiled_prefix_with_the_compiled_shape(templates):
    serving = STAGING.serving
    container = _one(templates["staging"]["Serving"], "AWS::SageMaker::Model")["PrimaryContainer"]
    assert container["Environment"] == {
        "SM_ON_MODEL": "/opt/ml/model",
        "SM_ON_SERVED_MODEL_NAME": serving.model_name,
        "SM_ON_BATCH_SIZE": "4",
        "SM_ON_SEQUENCE_LENGTH": "4096",
        "SM_ON_TENSOR_PARALLEL_SIZE": "2",
    }
    source = container["ModelDataSource"]["S3DataSource"]
    assert source["S3DataType"] == "S3Prefix" and source["CompressionType"] == "None"
    assert source["S3Uri"]["Fn::Join"][1][-1] == f"/{serving.model_prefix}"
    assert "ModelDataUrl" not in container, "no serving.properties tarball for vLLM"
    assert "huggingface-vllm-inference-neuronx" in str(templates["staging"]["Serving"]["Mappings"])


def test_variant_has_the_neuron_ami_and_the_long_startup(templates):
    (variant,) = _one(templates["staging"]["Serving"], "AWS::SageMaker::EndpointConfig")["ProductionVariants"]
    assert variant["InferenceAmiVersion"] == NEURON_AMI == "al2-ami-sagemaker-inference-neuron-2"
    assert variant["ContainerStartupHealthCheckTimeoutInSeconds"] == 3600
    assert variant["ModelDataDownloadTimeoutInSeconds"] == 1800
    assert variant["InstanceType"] == "ml.inf2.8xlarge" and variant["VolumeSizeInGB"] == 64


def test_model_is_network_isolated_and_reads_only_its_prefix(templates):
    template = templates["staging"]["Serving"]
    assert _one(template, "AWS::SageMaker::Model")["EnableNetworkIsolation"] is True
    statements = {s["Sid"]: s for s in _one(template, "AWS::IAM::ManagedPolicy")["PolicyDocument"]["Statement"]}
    assert statements["ListPinnedModelPrefixes"]["Condition"] == {
        "StringLike": {"s3:prefix": [f"{STAGING.serving.model_prefix}*"]}
    }
    assert "ReadModelTarball" not in statements


@pytest.fixture(scope="module")
def promotion(assemblies, tmp_path_factory):
    """staging serving another compiled version of the same shape (its lock's compiled_prefix)."""
    job = "llm-inf2-staging-0123456789abcdef0123456789abcdef-0-0"
    promoted = load_served(
        "staging",
        model_package_arn="arn:aws:sagemaker:us-east-1:123456789012:model-package/llminf2stagingdata-models/6",
        model_prefix=f"models/{job}/output/model/",
        compiled_prefix=f"models/{job}/neuron/bs4-seq4096-tp2/x-n-0/output/model/",
    )
    head_dir = Path(synth(promoted, tmp_path_factory.mktemp("staging-promoted")).directory)
    base = review_diff.read_assembly(Path(assemblies["staging"].directory))
    head = review_diff.read_assembly(head_dir)
    return head, review_diff.review(base, head, "promotion")


def test_promotion_replaces_the_model_and_updates_the_component_in_place(promotion):
    head, result = promotion
    serving = "llm-inf2-staging-Serving"
    template = head[serving].template
    model, config = (
        next(iter(resources_of(template, t))) for t in ("AWS::SageMaker::Model", "AWS::SageMaker::EndpointConfig")
    )
    endpoint = next(iter(resources_of(template, "AWS::SageMaker::Endpoint")))
    # staging scales to zero: the new model is the component's (updated in place), the endpoint config stays
    assert config and result.replaced == {serving: [model]}
    markdown = review_diff.render(result)
    component = next(iter(resources_of(template, "AWS::SageMaker::InferenceComponent")))
    (report,) = [r for r in result.stacks if r.name == serving]
    changed = {c["logicalId"]: c["impact"] for c in report.changed}
    assert changed[component] == "WILL_UPDATE" and endpoint not in changed, "the component is updated in place"
    assert "NEW ENDPOINT" not in markdown
