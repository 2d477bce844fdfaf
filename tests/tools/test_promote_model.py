"""tools/promote_model/ on moto (SageMaker model registry, S3 + KMS, CloudFormation's DescribeStacks).

Each environment is what its Data stack deploys: a KMS key, an artifact bucket encrypted with it, a model package
group, and the stack's outputs naming them (stacks/data/stack.py). A version is registered the way the Training
workflow's RegisterModel does (stacks/training/registry.py): its model folder in the bucket, its facts and lineage
in CustomerMetadataProperties (strings). The chain dev -> staging -> prod is one test; every refusal is one line
and leaves the registries, the buckets and the lock as they were.
"""

from __future__ import annotations

import difflib
import json
from pathlib import Path

import boto3
import botocore.session
import pytest
import yaml
from moto import mock_aws

from stacks.config import load_config
from stacks.config.model_lock import read_lock
from tests.synth import CODE_ASSET_HASH, FACTS, image_in, with_catalog
from tools import promote_model

ROOT = Path(__file__).resolve().parents[2]
REGION = "us-east-1"
MODEL_FILES = ("config.json", "model.safetensors", "tokenizer.json", "evaluation.json")
LMI_IMAGE, VLLM_IMAGE = image_in("lmi_neuronx"), image_in("vllm_neuronx")


def _data_template(group: str) -> dict:
    """The Data stack's resources promotion reads, with its output names."""
    return {
        "Resources": {
            "ArtifactKey": {
                "Type": "AWS::KMS::Key",
                "Properties": {
                    "EnableKeyRotation": True,
                    "KeyPolicy": {  # CDK's default: the account administers its key
                        "Version": "2012-10-17",
                        "Statement": [
                            {
                                "Effect": "Allow",
                                "Principal": {"AWS": {"Fn::Sub": "arn:${AWS::Partition}:iam::${AWS::AccountId}:root"}},
                                "Action": "kms:*",
                                "Resource": "*",
                            }
                        ],
                    },
                },
            },
            "ArtifactBucket": {
                "Type": "AWS::S3::Bucket",
                "Properties": {
                    "BucketEncryption": {
                        "ServerSideEncryptionConfiguration": [
                            {
                                "ServerSideEncryptionByDefault": {
                                    "SSEAlgorithm": "aws:kms",
                                    "KMSMasterKeyID": {"Fn::GetAtt": ["ArtifactKey", "Arn"]},
                                },
                                "BucketKeyEnabled": True,
                            }
                        ]
                    }
                },
            },
        },
        "Outputs": {
            "ArtifactBucketName": {"Value": {"Ref": "ArtifactBucket"}},
            "ArtifactKeyArn": {"Value": {"Fn::GetAtt": ["ArtifactKey", "Arn"]}},
            "AccessLogBucketName": {"Value": "access-logs"},
            "ModelPackageGroupName": {"Value": group},
        },
    }


class Account:
    """One moto account holding the environments' Data stacks."""

    def __init__(self):
        self.sagemaker = boto3.client("sagemaker", region_name=REGION)
        self.s3 = boto3.client("s3", region_name=REGION)
        self.cloudformation = boto3.client("cloudformation", region_name=REGION)
        self.data: dict[str, dict[str, str]] = {}

    def deploy_data(self, env: str) -> dict[str, str]:
        group = f"llminf2{env}data-models"
        self.sagemaker.create_model_package_group(ModelPackageGroupName=group)
        stack = f"llm-inf2-{env}-Data"
        self.cloudformation.create_stack(StackName=stack, TemplateBody=json.dumps(_data_template(group)))
        described = self.cloudformation.describe_stacks(StackName=stack)["Stacks"][0]
        self.data[env] = {o["OutputKey"]: o["OutputValue"] for o in described["Outputs"]}
        return self.data[env]

    def register(
        self,
        env: str,
        *,
        status: str = "Approved",
        model: str = "tinyllama",
        job: str = "llm-inf2-dev-20261201-0-0",
        backend: str = "lmi_neuronx",
        image: str = LMI_IMAGE,
        instance_types: tuple[str, ...] = ("ml.inf2.xlarge",),
        prefix: str | None = None,
        upload: bool = True,
        gain: str = "0.42",
        extra: dict | None = None,
    ) -> str:
        """A version as RegisterModel writes it (strings in CustomerMetadataProperties), its files uploaded."""
        bucket = self.data[env]["ArtifactBucketName"]
        prefix = prefix or f"models/{job}/output/model/"
        if upload:
            for name in MODEL_FILES:
                self.s3.put_object(Bucket=bucket, Key=prefix + name, Body=f"{name} of {job}".encode())
        facts = {k: (str(v).lower() if isinstance(v, bool) else str(v)) for k, v in FACTS[model].items()}
        metadata = {
            "training_job": job,
            "dataset": f"s3://{bucket}/datasets/instructions/",
            "dataset_objects": "3",
            "dataset_marker_version_id": "3HL4kqtJlcpXroDTDmJ.rmSpXd3dIbrHY",
            "lineage": f"s3://{bucket}/models/{job}/lineage.json",
            "lineage_version_id": "null",
            "code_asset_hash": CODE_ASSET_HASH,
            "eval_loss_improvement": gain,
            "quality_gate_min_improvement": "0.01",
            "serving_backend": backend,
            **facts,
            **(extra or {}),
        }
        arn = self.sagemaker.create_model_package(
            ModelPackageGroupName=self.data[env]["ModelPackageGroupName"],
            ModelPackageDescription=f"Training job {job}: s3://{bucket}/{prefix}",
            ModelApprovalStatus="PendingManualApproval",
            InferenceSpecification={
                "Containers": [
                    {
                        "Image": image,
                        "ModelDataSource": {
                            "S3DataSource": {
                                "S3Uri": f"s3://{bucket}/{prefix}",
                                "S3DataType": "S3Prefix",
                                "CompressionType": "None",
                            }
                        },
                        "Environment": {"OPTION_MODEL_ID": "/opt/ml/model"},
                    }
                ],
                "SupportedRealtimeInferenceInstanceTypes": list(instance_types),
                "SupportedContentTypes": ["application/json"],
                "SupportedResponseMIMETypes": ["application/json"],
            },
            ModelMetrics={
                "ModelQuality": {
                    "Statistics": {"ContentType": "application/json", "S3Uri": f"s3://{bucket}/{prefix}evaluation.json"}
                }
            },
            CustomerMetadataProperties=metadata,
        )["ModelPackageArn"]
        if status != "PendingManualApproval":
            # a person's decision (or the gate's Rejected); moto 5.2's UpdateModelPackage drops the metadata it is
            # not given (AWS keeps it): give it again
            self.sagemaker.update_model_package(
                ModelPackageArn=arn, ModelApprovalStatus=status, CustomerMetadataProperties=metadata
            )
        return arn

    def versions(self, env: str) -> list[str]:
        group = self.data[env]["ModelPackageGroupName"]
        listed = self.sagemaker.list_model_packages(ModelPackageGroupName=group)["ModelPackageSummaryList"]
        return sorted(p["ModelPackageArn"] for p in listed)

    def keys(self, env: str) -> list[str]:
        listed = self.s3.list_objects_v2(Bucket=self.data[env]["ArtifactBucketName"]).get("Contents", [])
        return sorted(o["Key"] for o in listed)


@pytest.fixture
def account():
    with mock_aws():
        yield Account()


def _shipped(config_dir: Path, *envs: str, compiled: bool = False) -> Path:
    """The shipped files. Unless `compiled`, the LMI environments compile at start-up (compile step off), so a
    merged version is what they serve: the promotion's own rules, apart from the compiled model's (whose
    path test_shipped_dev_promotes_its_compiled_version_not_the_merged_one follows)."""
    for env in envs:
        settings = yaml.safe_load((ROOT / "config" / f"{env}.yaml").read_text())
        if not compiled and settings["serving"]["backend"] == "lmi_neuronx":
            settings["training"]["neuron_compile"] = {"enabled": False}
        (config_dir / f"{env}.yaml").write_text(yaml.safe_dump(settings, sort_keys=False))
    return with_catalog(config_dir)


def _serving_like_dev(config_dir: Path, env: str) -> None:
    """config/<env>.yaml with dev's serving profile and a TinyLlama base: an organisation whose environments
    all serve the one model, so one version travels dev -> staging -> prod."""
    settings = yaml.safe_load((ROOT / "config" / f"{env}.yaml").read_text())
    dev = yaml.safe_load((ROOT / "config" / "dev.yaml").read_text())
    own = settings.get("serving", {}).get("scale_to_zero", {"enabled": False})  # prod's deploy approval refuses dev's
    settings["serving"] = {**dev["serving"], "initial_instance_count": 1, "scale_to_zero": own}
    settings.pop("rehearses", None)
    settings["training"]["neuron_compile"] = {"enabled": False}  # LMI compiling at start-up (see _shipped)
    if "base_model_key" in settings["training"]:
        settings["training"]["base_model_key"] = "base-models/tinyllama-1.1b-chat-v1.0/"
    else:
        settings["training"]["hyperparameters"]["model_id"] = "TinyLlama/TinyLlama-1.1B-Chat-v1.0"
    (config_dir / f"{env}.yaml").write_text(yaml.safe_dump(settings, sort_keys=False))
    with_catalog(config_dir)


def _promote(account: Account, config_dir: Path, version: str, to: str, source: str | None = None):
    argv = ["--to", to, "--version", version, "--config-dir", str(config_dir), "--region", REGION]
    return promote_model.main(argv + (["--from", source] if source else []))


def _refusal(capsys) -> str:
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("promote_model: refused: "), captured.err
    assert captured.out == ""
    return lines[0].removeprefix("promote_model: refused: ")


def test_moto_describes_a_version_in_botocore_s_shape(account):
    """What the tests register is what DescribeModelPackage returns on AWS: botocore's output shape."""
    account.deploy_data("dev")
    described = account.sagemaker.describe_model_package(ModelPackageName=account.register("dev"))
    shape = botocore.session.get_session().get_service_model("sagemaker").operation_model("DescribeModelPackage")
    members = set(shape.output_shape.members)
    assert set(described) - {"ResponseMetadata"} <= members
    # moto 5.2 leaves out a versioned package's ModelPackageName (AWS returns the group's); the tool never reads it
    assert set(shape.output_shape.required_members) - set(described) == {"ModelPackageName"}
    read = {"ModelPackageArn", "ModelPackageGroupName", "ModelApprovalStatus", "InferenceSpecification"}
    assert read | {"CustomerMetadataProperties", "ModelMetrics"} <= members and read <= set(described)
    metadata = shape.output_shape.members["CustomerMetadataProperties"]
    assert len(described["CustomerMetadataProperties"]) <= metadata.metadata["max"]


def test_dev_to_staging_to_prod_copies_registers_and_locks(account, tmp_path, capsys):
    config_dir = tmp_path / "config"
    config_dir.mkdir()
    _shipped(config_dir, "dev")
    for env in ("staging", "prod"):
        _serving_like_dev(config_dir, env)
    data = {env: account.deploy_data(env) for env in ("dev", "staging", "prod")}
    dev_version = account.register("dev")

    assert _promote(account, config_dir, dev_version, "dev") == 0
    dev_out = dict(line.split("=", 1) for line in capsys.readouterr().out.splitlines())
    assert dev_out == {
        "model_package_arn": dev_version,
        "source_model_package_arn": "",
        "lock": (config_dir / "dev.model.json").as_posix(),
        "lock_changed": "true",
        "copied_objects": "0",
    }

    assert _promote(account, config_dir, dev_version, "staging", source="dev") == 0
    staging_out = dict(line.split("=", 1) for line in capsys.readouterr().out.splitlines())
    (staging_version,) = account.versions("staging")
    assert staging_out["model_package_arn"] == staging_version and staging_out["copied_objects"] == "4"

    assert _promote(account, config_dir, staging_version, "prod", source="staging") == 0
    captured = capsys.readouterr()
    prod_out = dict(line.split("=", 1) for line in captured.out.splitlines())
    (prod_version,) = account.versions("prod")
    assert prod_out["model_package_arn"] == prod_version and prod_out["source_model_package_arn"] == staging_version
    print(f"lock diff of prod:\n{captured.err}")

    # each group holds its own version; the copies keep the keys, each under its environment's KMS key
    assert [account.versions(env) for env in ("dev", "staging", "prod")] == [
        [dev_version],
        [staging_version],
        [prod_version],
    ]
    prefix = "models/llm-inf2-dev-20261201-0-0/output/model/"
    for env in ("staging", "prod"):
        assert account.keys(env) == sorted(prefix + name for name in MODEL_FILES)
        for name in MODEL_FILES:
            head = account.s3.head_object(Bucket=data[env]["ArtifactBucketName"], Key=prefix + name)
            assert head["ServerSideEncryption"] == "aws:kms" and head["SSEKMSKeyId"] == data[env]["ArtifactKeyArn"]
            print(f"{env}: s3://{data[env]['ArtifactBucketName']}/{prefix}{name} SSE-KMS {head['SSEKMSKeyId']}")
    assert data["staging"]["ArtifactKeyArn"] != data["prod"]["ArtifactKeyArn"] != data["dev"]["ArtifactKeyArn"]

    # the registered copy says where it comes from and points into its own bucket
    copy = account.sagemaker.describe_model_package(ModelPackageName=prod_version)
    assert copy["ModelApprovalStatus"] == "Approved"
    assert copy["CustomerMetadataProperties"]["source_model_package_arn"] == staging_version
    uri = copy["InferenceSpecification"]["Containers"][0]["ModelDataSource"]["S3DataSource"]["S3Uri"]
    assert uri == f"s3://{data['prod']['ArtifactBucketName']}/{prefix}"

    # the locks: deterministic JSON, the same model and facts, each naming its own version and its source
    locks = {env: (config_dir / f"{env}.model.json").read_text() for env in ("dev", "staging", "prod")}
    for env, text in locks.items():
        assert text == json.dumps(json.loads(text), sort_keys=True, indent=2) + "\n"
        print(f"config/{env}.model.json:\n{text}")
    parsed = {env: json.loads(text) for env, text in locks.items()}
    assert (parsed["dev"]["model_package_arn"], parsed["dev"]["lineage"]["source_model_package_arn"]) == (
        dev_version,
        None,
    )
    assert parsed["staging"]["lineage"]["source_model_package_arn"] == dev_version
    assert parsed["prod"]["lineage"]["source_model_package_arn"] == staging_version
    assert parsed["prod"]["facts"] == parsed["dev"]["facts"] == {**FACTS["tinyllama"]}
    changed = [
        line
        for line in captured.err.splitlines()
        if line.startswith(("+", "-")) and not line.startswith(("+++", "---"))
    ]
    assert changed == ["+" + line for line in locks["prod"].splitlines()]  # a new file: the lock, line by line
    between = [
        line
        for line in difflib.unified_diff(locks["staging"].splitlines(), locks["prod"].splitlines(), lineterm="")
        if line.startswith(("+", "-")) and not line.startswith(("+++", "---"))
    ]
    assert between == [  # sorted keys: lineage before model_package_arn
        f'-    "source_model_package_arn": "{dev_version}",',
        f'+    "source_model_package_arn": "{staging_version}",',
        f'-  "model_package_arn": "{staging_version}",',
        f'+  "model_package_arn": "{prod_version}",',
    ], between
    print("staging -> prod lock diff:\n" + "\n".join(between))
    # every environment then serves its version: the synth's loader accepts each lock
    for env in ("dev", "staging", "prod"):
        assert load_config(env, config_dir).model == read_lock(config_dir / f"{env}.model.json")

    # a rerun copies again but registers nothing new and leaves the lock as it is
    assert _promote(account, config_dir, staging_version, "prod", source="staging") == 0
    assert "lock_changed=false" in capsys.readouterr().out and account.versions("prod") == [prod_version]


@pytest.fixture
def dev_and_shipped(account, tmp_path):
    """dev, staging and prod as they ship, each Data stack deployed."""
    config_dir = tmp_path / "config"
    config_dir.mkdir()
    _shipped(config_dir, "dev", "staging", "prod")
    for env in ("dev", "staging", "prod"):
        account.deploy_data(env)
    return config_dir


def _untouched(account: Account, config_dir: Path) -> tuple:
    return (
        [account.versions(e) for e in ("dev", "staging", "prod")],
        [account.keys(e) for e in ("staging", "prod")],
        sorted(p.name for p in config_dir.glob("*.model.json")),
    )


REFUSALS = [
    (
        "pending",
        {"status": "PendingManualApproval"},
        "dev",
        None,
        "ModelApprovalStatus: PendingManualApproval; only an Approved version is promoted: approve it in the model "
        "registry first (a person's decision)",
    ),
    (
        "rejected-by-the-gate",
        {"status": "Rejected", "gain": "0.004"},
        "dev",
        None,
        "ModelApprovalStatus: Rejected by the quality gate (eval_loss_improvement 0.004 < min_improvement 0.01); "
        "only an Approved version is promoted: train a better model",
    ),
    (
        "rejected-by-the-benchmark",
        {
            "status": "Rejected",
            "extra": {
                "benchmark_max_drop_points": "6.25",
                "quality_gate_max_benchmark_drop": "2",
                "benchmark_scores": "s3://b/models/j/benchmark/j-b-0/output/model/benchmark.json",
            },
        },
        "dev",
        None,
        "ModelApprovalStatus: Rejected by the quality gate (benchmark_max_drop_points 6.25 > max_benchmark_drop 2; "
        "scores: s3://b/models/j/benchmark/j-b-0/output/model/benchmark.json); only an Approved version is promoted: "
        "train a model that keeps its base's benchmark scores",
    ),
    (
        "another-architecture",
        {"model": "qwen2.5"},
        "dev",
        None,
        ": model_type qwen2 (Qwen2ForCausalLM); {config}/dev.yaml serving.backend lmi_neuronx loads bloom, gpt2, "
        "gpt_neox, gptj, llama, mistral, mixtral, opt: serve it with backend vllm_neuronx",
    ),
    (
        "another-size",
        {"model": "llama2"},
        "dev",
        None,
        ": 6738415616 parameters (6.74 B); {config}/dev.yaml trains and serves TinyLlama/TinyLlama-1.1B-Chat-v1.0, "
        "1.10 B (tolerance 0.11 B): promote a version of that base, or make the environment's training base the one "
        "this version was trained from",
    ),
    (
        "another-backend",
        {},
        "staging",
        "dev",
        "was registered for backend lmi_neuronx; {config}/staging.yaml serving.backend is vllm_neuronx: promote a "
        "version registered for vllm_neuronx",
    ),
    (
        "another-image",
        {"image": VLLM_IMAGE},
        "dev",
        None,
        f"runs image {VLLM_IMAGE}; {{config}}/dev.yaml serving.image is lmi_neuronx",
    ),
    (
        "instance-not-listed",
        {"model": "llama2", "job": "llm-inf2-prod-20261201-0-0", "instance_types": ("ml.inf2.48xlarge",)},
        "prod",
        "dev",
        "lists ml.inf2.48xlarge; {config}/prod.yaml serving.instance_type is ml.inf2.24xlarge: promote a version "
        "registered for ml.inf2.24xlarge",
    ),
    (
        "artifacts-missing",
        {"upload": False},
        "dev",
        None,
        ": artifacts missing: nothing under s3://{bucket}/models/llm-inf2-dev-20261201-0-0/output/model/; the "
        "version's model is not there",
    ),
    (
        "merged-model-for-a-compiled-backend",
        {"model": "qwen2.5", "backend": "vllm_neuronx", "image": VLLM_IMAGE, "instance_types": ("ml.inf2.8xlarge",)},
        "staging",
        "dev",
        "has no compiled model; {config}/staging.yaml serving.backend vllm_neuronx serves one of shape "
        "neuron/bs4-seq4096-tp2/: promote the compiled version (RegisterCompiledModel)",
    ),
]


@pytest.mark.parametrize(("case", "version", "to", "source", "expected"), REFUSALS, ids=[c[0] for c in REFUSALS])
def test_each_refusal_is_one_line_and_changes_nothing(
    account, dev_and_shipped, capsys, case, version, to, source, expected
):
    config_dir = dev_and_shipped
    arn = account.register("dev", **version)
    before = _untouched(account, config_dir)
    assert _promote(account, config_dir, arn, to, source) == 2
    line = _refusal(capsys)
    bucket = account.data["dev"]["ArtifactBucketName"]
    assert arn in line and expected.format(config=config_dir.as_posix(), bucket=bucket) in line, line
    assert _untouched(account, config_dir) == before


def test_a_compiled_version_of_another_shape_is_refused(account, dev_and_shipped, capsys):
    """staging serves neuron/bs4-seq4096-tp2/; a version compiled with batch size 8 is not what it serves."""
    job = "llm-inf2-staging-20261201-0-0"
    merged = account.register(
        "staging",
        model="qwen2.5",
        job=job,
        backend="vllm_neuronx",
        image=VLLM_IMAGE,
        instance_types=("ml.inf2.8xlarge",),
    )
    compiled = account.register(
        "staging",
        model="qwen2.5",
        job=job,
        backend="vllm_neuronx",
        image=VLLM_IMAGE,
        instance_types=("ml.inf2.8xlarge",),
        prefix=f"models/{job}/neuron/bs8-seq4096-tp2/{job}-n-0/output/model/",
        extra={"compile_job": f"{job}-n-0", "merged_package": merged},
    )
    assert _promote(account, dev_and_shipped, compiled, "staging") == 2
    line = _refusal(capsys)
    assert line.startswith("config/staging.model.json: compiled_prefix: " + compiled), line
    assert f"is compiled as models/{job}/neuron/bs8-seq4096-tp2/" in line
    assert "serves shape neuron/bs4-seq4096-tp2/ (vLLM Neuron refuses another)" in line
    assert not (dev_and_shipped / "staging.model.json").exists()


def test_the_compiled_version_of_staging_s_shape_locks_both_prefixes(account, dev_and_shipped, capsys):
    job = "llm-inf2-staging-20261201-0-0"
    common = {
        "model": "qwen2.5",
        "job": job,
        "backend": "vllm_neuronx",
        "image": VLLM_IMAGE,
        "instance_types": ("ml.inf2.8xlarge",),
    }
    merged = account.register("staging", **common)
    compiled_prefix = f"models/{job}/neuron/bs4-seq4096-tp2/{job}-n-0/output/model/"
    compiled = account.register(
        "staging", **common, prefix=compiled_prefix, extra={"compile_job": f"{job}-n-0", "merged_package": merged}
    )
    assert _promote(account, dev_and_shipped, compiled, "staging") == 0
    lock = read_lock(dev_and_shipped / "staging.model.json")
    assert (lock.model_prefix, lock.compiled_prefix) == (f"models/{job}/output/model/", compiled_prefix)
    served = load_config("staging", dev_and_shipped).serving
    assert served.model_prefix == compiled_prefix


# What RegisterCompiledModel records from dev's compiled config.json (`neuron`: TP 2, 2048 positions, batch 4, f16)
COMPILED_METADATA = {
    "compiled_tensor_parallel_degree": "2",
    "compiled_n_positions": "2048",
    "compiled_batch_size": "4",
    "compiled_dtype": "f16",
    "compiler_version": "2.15.141.0+d3cfc8ca",
}


def test_shipped_dev_promotes_its_compiled_version_not_the_merged_one(account, tmp_path, capsys):
    """dev as it ships compiles with LMI's partition: its merged version is refused, the compiled one (the
    workflow's RegisterCompiledModel, naming the merged package) is served from its compiled folder."""
    (tmp_path / "config").mkdir()
    config_dir = _shipped(tmp_path / "config", "dev", compiled=True)
    account.deploy_data("dev")
    job = "llm-inf2-dev-20261201-0-0"
    merged = account.register("dev", job=job)
    assert _promote(account, config_dir, merged, "dev") == 2
    assert "has no compiled model" in _refusal(capsys)
    compiled_prefix = f"models/{job}/neuron/tp2-np2048-bs4-fp16-neuronx-cc-2.15.141.0/{job[:-4]}-n-0/output/model/"
    compiled = account.register(
        "dev",
        job=job,
        prefix=compiled_prefix,
        extra={"compile_job": f"{job[:-4]}-n-0", "merged_package": merged, **COMPILED_METADATA},
    )
    assert _promote(account, config_dir, compiled, "dev") == 0, capsys.readouterr().err
    lock = read_lock(config_dir / "dev.model.json")
    assert (lock.model_prefix, lock.compiled_prefix) == (f"models/{job}/output/model/", compiled_prefix)
    assert load_config("dev", config_dir).serving.model_prefix == compiled_prefix
    assert lock.compiled.tensor_parallel_degree == 2 and lock.compiled.compiler_version == "2.15.141.0+d3cfc8ca"


def test_a_model_in_another_bucket_is_refused(account, dev_and_shipped, capsys):
    """The version is dev's: promoting it as if staging's registry held it names the bucket it lies in."""
    arn = account.register("dev")
    assert _promote(account, dev_and_shipped, arn, "prod", source="prod") == 2
    line = _refusal(capsys)
    assert f"{arn}: it is in group llminf2devdata-models, not environment prod's llminf2proddata-models" in line


def test_a_version_without_recorded_facts_is_refused(account, dev_and_shipped, capsys):
    arn = account.register("dev")
    described = account.sagemaker.describe_model_package(ModelPackageName=arn)
    metadata = dict(described["CustomerMetadataProperties"])
    del metadata["parameters"]
    account.sagemaker.update_model_package(
        ModelPackageArn=arn, CustomerMetadataProperties=metadata, ModelApprovalStatus="Approved"
    )
    assert _promote(account, dev_and_shipped, arn, "dev") == 2
    assert _refusal(capsys) == (
        f"{arn}: CustomerMetadataProperties.parameters: missing; the version records no model facts (registered "
        "before the Training workflow read them from the model's files): register it again with the current workflow"
    )


def test_a_target_without_its_data_stack_is_refused(account, tmp_path, capsys):
    config_dir = tmp_path / "config"
    config_dir.mkdir()
    _shipped(config_dir, "dev", "staging")
    account.deploy_data("dev")
    arn = account.register("dev")
    assert _promote(account, config_dir, arn, "staging", source="dev") == 2
    assert _refusal(capsys).startswith(
        "environment staging: its Data stack llm-inf2-staging-Data cannot be described (ValidationError): deploy it "
        "first (make deploy TARGET=aws ENV=staging) with these credentials"
    )


def _verify(config_dir: Path, env: str) -> int:
    return promote_model.main(["--verify", "--to", env, "--config-dir", str(config_dir), "--region", REGION])


@pytest.fixture
def promoted_staging(account, tmp_path, capsys):
    """dev's version promoted into staging (dev's serving profile there): staging's lock and its copies."""
    config_dir = tmp_path / "config"
    config_dir.mkdir()
    _shipped(config_dir, "dev", "prod")
    _serving_like_dev(config_dir, "staging")
    data = {env: account.deploy_data(env) for env in ("dev", "staging")}
    assert _promote(account, config_dir, account.register("dev"), "staging", source="dev") == 0
    capsys.readouterr()
    return config_dir, data


def test_verify_accepts_a_lock_whose_version_and_artifacts_are_in_the_environment(promoted_staging, capsys):
    config_dir, data = promoted_staging
    lock = json.loads((config_dir / "staging.model.json").read_text())
    assert _verify(config_dir, "staging") == 0
    assert capsys.readouterr().out.strip() == (
        f"promote_model: verified staging: {lock['model_package_arn']} Approved, {len(MODEL_FILES)} objects under "
        f"{lock['model_prefix']} in {data['staging']['ArtifactBucketName']}"
    )


def test_verify_without_a_lock_says_nothing_is_served(account, dev_and_shipped, capsys):
    assert _verify(dev_and_shipped, "dev") == 0
    assert capsys.readouterr().out.strip() == "promote_model: verified dev: no dev.model.json: nothing served"


def test_verify_refuses_a_lock_whose_artifacts_are_not_in_the_environment_s_bucket(account, promoted_staging, capsys):
    config_dir, data = promoted_staging
    lock = json.loads((config_dir / "staging.model.json").read_text())
    bucket = data["staging"]["ArtifactBucketName"]
    for key in account.keys("staging"):
        account.s3.delete_object(Bucket=bucket, Key=key)
    assert _verify(config_dir, "staging") == 2
    assert _refusal(capsys) == (
        f"{lock['model_package_arn']}: artifacts missing: nothing under s3://{bucket}/{lock['model_prefix']}; "
        "the version's model is not there"
    )


def test_verify_refuses_a_lock_naming_another_environment_s_version(account, promoted_staging, capsys):
    config_dir, data = promoted_staging
    path = config_dir / "staging.model.json"
    lock = json.loads(path.read_text())
    (dev_version,) = account.versions("dev")
    path.write_text(json.dumps({**lock, "model_package_arn": dev_version}, sort_keys=True, indent=2) + "\n")
    assert _verify(config_dir, "staging") == 2
    assert _refusal(capsys) == (
        f"{dev_version}: staging.model.json names a version of group {data['dev']['ModelPackageGroupName']}, not "
        f"staging's {data['staging']['ModelPackageGroupName']}: promote it into staging (make promote FROM=<env> "
        "TO=staging)"
    )
