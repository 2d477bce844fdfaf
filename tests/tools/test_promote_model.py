"""tools/promote_model.py against moto's model registry: an Approved package becomes the one-line
`serving.model_prefix` change; a package that is not Approved, or registered for another backend or image, or
whose prefix the environment's config refuses, changes nothing and says why in one line."""

from __future__ import annotations

import shutil
from pathlib import Path

import boto3
import pytest
from moto import mock_aws

from stacks.config import load_config
from stacks.image_table import image_uris
from tools import promote_model

ROOT = Path(__file__).resolve().parents[2]
GROUP = "llminf2devdata-models"
BUCKET = "llm-inf2-dev-data-artifactbucket-x1"
MERGED = "models/llm-inf2-dev-5d41402abc4b2a76b9719d911017c592-0-0/output/model/"
LMI_IMAGE = image_uris("lmi_neuronx")[0]
VLLM_IMAGE = image_uris("vllm_neuronx")[0]


@pytest.fixture
def config_dir(tmp_path):
    for env in ("dev", "staging"):
        shutil.copy(ROOT / "config" / f"{env}.yaml", tmp_path / f"{env}.yaml")
    return tmp_path


@pytest.fixture
def sagemaker():
    with mock_aws():
        client = boto3.client("sagemaker", region_name="us-east-1")
        client.create_model_package_group(ModelPackageGroupName=GROUP)
        yield client


def _register(
    sagemaker, *, status: str, backend: str = "lmi_neuronx", image: str = LMI_IMAGE, prefix: str = MERGED
) -> str:
    arn = sagemaker.create_model_package(
        ModelPackageGroupName=GROUP,
        ModelApprovalStatus="PendingManualApproval",
        InferenceSpecification={
            "Containers": [
                {
                    "Image": image,
                    "ModelDataSource": {
                        "S3DataSource": {
                            "S3Uri": f"s3://{BUCKET}/{prefix}",
                            "S3DataType": "S3Prefix",
                            "CompressionType": "None",
                        }
                    },
                }
            ],
            "SupportedRealtimeInferenceInstanceTypes": ["ml.inf2.xlarge"],
            "SupportedContentTypes": ["application/json"],
            "SupportedResponseMIMETypes": ["application/json"],
        },
        CustomerMetadataProperties={"serving_backend": backend},
    )["ModelPackageArn"]
    if status != "PendingManualApproval":
        # moto 5.2's UpdateModelPackage drops the metadata it is not given (AWS keeps it): give it again
        sagemaker.update_model_package(
            ModelPackageArn=arn, ModelApprovalStatus=status, CustomerMetadataProperties={"serving_backend": backend}
        )
    return arn


def _promote(sagemaker, arn: str, env: str, config_dir: Path):
    return promote_model.promote(sagemaker.describe_model_package(ModelPackageName=arn), env, config_dir)


def test_an_approved_package_is_the_one_line_change(sagemaker, config_dir):
    before = (config_dir / "dev.yaml").read_text().splitlines()
    arn = _register(sagemaker, status="Approved")
    old, new = _promote(sagemaker, arn, "dev", config_dir)
    after = (config_dir / "dev.yaml").read_text().splitlines()
    changed = [(a, b) for a, b in zip(before, after, strict=True) if a != b]
    assert changed == [(f"  model_prefix: {old}", f"  model_prefix: {MERGED}")]
    assert new == MERGED == load_config("dev", config_dir).serving.model_prefix


@pytest.mark.parametrize("status", ["PendingManualApproval", "Rejected"])
def test_a_package_that_is_not_approved_is_refused(sagemaker, config_dir, status):
    arn = _register(sagemaker, status=status)
    before = (config_dir / "dev.yaml").read_text()
    with pytest.raises(promote_model.Refused, match=f"is {status}: approve it in the model registry first"):
        _promote(sagemaker, arn, "dev", config_dir)
    assert (config_dir / "dev.yaml").read_text() == before


def test_a_package_for_another_backend_or_image_is_refused(sagemaker, config_dir):
    other_backend = _register(sagemaker, status="Approved", backend="vllm_neuronx", image=VLLM_IMAGE)
    with pytest.raises(
        promote_model.Refused, match="registered for serving backend vllm_neuronx; dev serves lmi_neuronx"
    ):
        _promote(sagemaker, other_backend, "dev", config_dir)
    other_image = _register(sagemaker, status="Approved", image=VLLM_IMAGE)
    with pytest.raises(promote_model.Refused, match="runs image .*vllm.*; dev serves lmi_neuronx"):
        _promote(sagemaker, other_image, "dev", config_dir)


def test_a_merged_package_for_a_vllm_environment_is_refused_by_its_config(sagemaker, config_dir):
    """staging serves vllm_neuronx, which needs the compiled package version's prefix: config says so, and
    the file is restored."""
    arn = _register(sagemaker, status="Approved", backend="vllm_neuronx", image=VLLM_IMAGE)
    before = (config_dir / "staging.yaml").read_text()
    with pytest.raises(promote_model.Refused, match="serving.model_prefix"):
        _promote(sagemaker, arn, "staging", config_dir)
    assert (config_dir / "staging.yaml").read_text() == before


def test_the_command_line_refuses_with_one_line_and_exit_2(sagemaker, config_dir, capsys):
    arn = _register(sagemaker, status="PendingManualApproval")
    code = promote_model.main(
        ["--env", "dev", "--package-arn", arn, "--config-dir", str(config_dir), "--region", "us-east-1"]
    )
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1 and err.startswith("promote_model: refused: ")
