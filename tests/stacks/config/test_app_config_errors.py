"""Every malformed configuration fails the real entry point with exit 2 and exactly one stderr line."""

from __future__ import annotations

import contextlib
import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.synth import ROOT, add_record, cli_context, lock_document, with_catalog

LOCK = "__lock__"  # a case's config/<env>.model.json (tests.synth.lock_document), written beside the YAML
SHIPPED = yaml.safe_load((ROOT / "config" / "dev.yaml").read_text())  # a first deploy: nothing served yet
# dev after the first-deploy guide (a version promoted: serving on), so the serving rules run too
VALID = {**SHIPPED, LOCK: lock_document("dev")}
PROD_VALID = {**yaml.safe_load((ROOT / "config" / "prod.yaml").read_text()), LOCK: lock_document("prod")}


def _with(path: str, value, base: dict = VALID) -> dict:
    """A copy of the valid dev config (or `base`) with `a.b.c` set to value."""
    config = json.loads(json.dumps(base))
    node = config
    *parents, leaf = path.split(".")
    for part in parents:
        node = node.setdefault(part, {})
    node[leaf] = value
    return config


def _without(path: str, base: dict = VALID) -> dict:
    config = json.loads(json.dumps(base))
    node = config
    *parents, leaf = path.split(".")
    for part in parents:
        node = node[part]
    del node[leaf]
    return config


def _changed(base: dict, **changes) -> dict:
    """A copy of `base` with `changes` applied: dotted paths written with `__` for `.`, None deletes."""
    config = json.loads(json.dumps(base))
    for dotted, value in changes.items():
        *parents, leaf = dotted.split("__")
        node = config
        for part in parents:
            node = node.setdefault(part, {})
        if value is None:
            node.pop(leaf, None)
        else:
            node[leaf] = value
    return config


def _isolated(**changes) -> dict:
    """dev made isolated step by step."""
    return _changed(_with("network.isolated", True), **changes)


_STAGING_SHIPPED = yaml.safe_load((ROOT / "config" / "staging.yaml").read_text())
_VLLM_PREFIX = lock_document("staging")["compiled_prefix"]
STAGING = {**_STAGING_SHIPPED, LOCK: lock_document("staging")}


def _staging(**changes) -> dict:
    """config/staging.yaml (backend vllm_neuronx) with `changes`."""
    return _changed(STAGING, **changes)


RECORD = "__record__"  # a case's own base-model record (tests.synth.add_record's arguments), beside its YAML


def _staging_record(hub_id: str, **facts) -> dict:
    """staging training (and so serving) a base of its own: Qwen2.5-7B's record with `facts`."""
    record = {"hub_id": hub_id, "like": "qwen2.5-7b-instruct", **facts}
    return {**_staging(training__hyperparameters__model_id=hub_id), RECORD: record}


_HPS = VALID["training"]["hyperparameters"]
_READY = {
    "training__base_model_key": "base-models/tinyllama-1.1b-chat-v1.0/",
    "training__hyperparameters__model_id": None,
    "training__image_repository": "llm-inf2-training:qlora-1",
    **({"pruning__enabled": False} if "pruning" in VALID else {}),
}

# A hub token's secret and its key as AWS writes their ARNs (the secret's name, then six characters of its own).
SECRET = "arn:aws:secretsmanager:us-east-1:123456789012:secret:llm-inf2/hub-token-AbC123"
SECRET_KEY = "arn:aws:kms:us-east-1:123456789012:key/1234abcd-12ab-34cd-56ef-1234567890ab"

# (case id, env name, file content (dict = YAML dump, str = raw text, None = no file), expected fragment)
CASES = [
    (
        "unknown-top-level-key",
        "dev",
        {**VALID, "termination_protect": True},
        "dev.yaml: termination_protect: unknown setting; did you mean 'termination_protection'?",
    ),
    ("unknown-nested-key", "dev", _with("data.noncurrent_days", 3), "dev.yaml: data.noncurrent_days: unknown setting"),
    (
        "bool-as-string",
        "dev",
        _with("termination_protection", "yes please"),
        "dev.yaml: termination_protection: got 'yes please'; expected true or false",
    ),
    (
        "int-as-string",
        "dev",
        _with("data.abort_incomplete_multipart_upload_days", "7"),
        "data.abort_incomplete_multipart_upload_days: got '7'; expected an integer in 1..365",
    ),
    (
        "int-as-float",
        "dev",
        _with("data.access_log_expiration_days", 90.5),
        "data.access_log_expiration_days: got 90.5; expected an integer in 30..3650",
    ),
    (
        "int-as-bool",
        "dev",
        _with("data.access_log_expiration_days", True),
        "data.access_log_expiration_days: got True; expected an integer",
    ),
    (
        "below-range",
        "dev",
        _with("data.abort_incomplete_multipart_upload_days", 0),
        "data.abort_incomplete_multipart_upload_days: got 0; expected an integer in 1..365",
    ),
    (
        "above-range",
        "dev",
        _with("data.noncurrent_version_expiration_days", 99999),
        "data.noncurrent_version_expiration_days: got 99999; expected an integer in 1..3650",
    ),
    ("negative", "dev", _with("data.access_log_expiration_days", -5), "got -5; expected an integer in 30..3650"),
    ("bad-account", "dev", _with("account", "12345"), "account: got '12345'; must match"),
    ("account-as-number", "dev", _with("account", 123456789012), "account: got 123456789012; expected a string"),
    ("bad-region", "dev", _with("region", "Mars-1"), "region: got 'Mars-1'; must match"),
    (
        "region-without-images",
        "dev",
        _with("region", "af-south-1"),
        "dev.yaml: region: no container image for region 'af-south-1'; supported: ap-northeast-1, ",
    ),
    ("bad-app-name", "dev", _with("app_name", "Bad_Name"), "app_name: got 'Bad_Name'; must match"),
    ("tags-not-mapping", "dev", _with("tags", ["a", "b"]), "tags: got ['a', 'b']; expected a mapping"),
    ("tag-value-not-string", "dev", _with("tags.owner", 42), "tags.owner: got 42; expected a string"),
    # Found by tests/security/test_config_fuzz.py: CloudFormation rejects these only at deploy time.
    ("tag-value-empty", "dev", _with("tags.owner", ""), "tags.owner: got ''; must match"),
    ("tag-value-bad-characters", "dev", _with("tags.owner", "a|b"), "tags.owner: got 'a|b'; must match"),
    ("tag-key-reserved", "dev", _with("tags", {"aws:owner": "x"}), "tags: key 'aws:owner' must match"),
    ("section-not-mapping", "dev", _with("data", 5), "data: got 5; expected a mapping of settings"),
    ("top-level-list", "dev", "- just\n- a list\n", "<top level>: got ['just', 'a list']; expected a mapping"),
    ("invalid-yaml", "dev", "app_name: [unclosed\n", "dev.yaml: line 2: invalid YAML"),
    (
        "duplicate-key",
        "dev",
        "app_name: a1\napp_name: b2\n",
        "dev.yaml: line 2: invalid YAML: duplicate key 'app_name'",
    ),
    ("missing-file", "staging", None, "staging.yaml: env: no such file for env 'staging'; known environments: dev"),
    ("bad-env-name", "Prod!", None, "context: env: got 'Prod!'; must match"),
    ("env-path-traversal", "../dev", None, "context: env: got '../dev'; must match"),
    ("not-utf8", "dev", b"app_name: \xff\xfe\n", "dev.yaml: <file>: not UTF-8 text"),
    (
        "removed-required-section-is-fine-but-null-is-not",
        "dev",
        _with("data", None),
        "data: got None; expected a mapping of settings",
    ),
    (
        "quality-gate-range",
        "dev",
        _with("training.quality_gate.min_improvement", 11),
        "training.quality_gate.min_improvement: got 11",
    ),
    (
        "quality-gate-type",
        "dev",
        _with("training.quality_gate.min_improvement", "high"),
        "training.quality_gate.min_improvement: got 'high'",
    ),
    (
        "quality-gate-unknown",
        "dev",
        _with("training.quality_gate.min_loss", 1),
        "training.quality_gate.min_loss: unknown setting",
    ),
    (
        "benchmark-drop-range",
        "dev",
        _changed(VALID, training__quality_gate__max_benchmark_drop=101, training__benchmark={"tasks": ["arc_easy"]}),
        "dev.yaml: training.quality_gate.max_benchmark_drop: got 101.0; expected a number in 0.0..100.0",
    ),
    (
        "benchmark-without-gate",
        "dev",
        _with("training.benchmark", {"tasks": ["arc_easy", "hellaswag"]}),
        "dev.yaml: training.quality_gate.max_benchmark_drop: missing; benchmark.tasks runs arc_easy, hellaswag "
        "for the gate: set the points a task's score may fall below the base's (e.g. 2.0)",
    ),
    (
        "benchmark-gate-without-tasks",
        "dev",
        _with("training.quality_gate.max_benchmark_drop", 2.5),
        "dev.yaml: training.quality_gate.max_benchmark_drop: got 2.5 with no benchmark.tasks; name tasks "
        "staged under benchmark.staged_prefix (make eval-data TASK=<task> ENV=<env>) or set it to null",
    ),
    (
        "benchmark-task-twice",
        "dev",
        _changed(VALID, training__quality_gate__max_benchmark_drop=2, training__benchmark={"tasks": ["piqa", "piqa"]}),
        "dev.yaml: training.benchmark.tasks: lists 'piqa' twice; name each task once",
    ),
    (
        "training-instance-type",
        "dev",
        _with("training.instance_type", "g5.2xlarge"),
        "training.instance_type: got 'g5.2xlarge'; must match",
    ),
    (
        "training-instance-count",
        "dev",
        _with("training.instance_count", 0),
        "training.instance_count: got 0; expected an integer in 1..8",
    ),
    ("training-volume", "dev", _with("training.volume_size_gb", 1), "training.volume_size_gb: got 1"),
    (
        "training-runtime",
        "dev",
        _with("training.max_runtime_hours", 1000),
        "training.max_runtime_hours: got 1000; expected an integer in 1..672",
    ),
    (
        "training-wait-shorter-than-runtime",
        "dev",
        _with("training.max_wait_hours", 6),
        "training.max_wait_hours: got 6; must be >= max_runtime_hours 12",
    ),
    (
        "training-wait-without-spot",
        "dev",
        _with("training.spot", False),
        "training.max_wait_hours: got 24; only managed spot (spot: true) waits",
    ),
    (
        "training-retention",
        "dev",
        _with("training.log_retention_days", 10),
        "training.log_retention_days: got 10; allowed: 1, 3, 5",
    ),
    (
        "training-image-uri",
        "dev",
        _with("training.image_uri", "docker.io/library/pytorch:latest"),
        "training.image_uri: got 'docker.io/library/pytorch:latest'; must match",
    ),
    (
        "training-unknown-hyperparameter",
        "dev",
        _with("training.hyperparameters.lora_rank", "8"),
        "training.hyperparameters.lora_rank: unknown hyperparameter; train.py accepts:",
    ),
    (
        "training-reserved-hyperparameter",
        "dev",
        _with("training.hyperparameters.train_data", "s3://b/k"),
        "training.hyperparameters.train_data: is set by SageMaker",
    ),
    (
        "training-hyperparameter-type",
        "dev",
        _with("training.hyperparameters.lora_r", "sixty-four"),
        "training.hyperparameters.lora_r: got 'sixty-four'; train.py expects an integer",
    ),
    (
        "training-hyperparameter-not-string",
        "dev",
        _with("training.hyperparameters.lora_r", 64),
        "training.hyperparameters.lora_r: got 64; expected a string",
    ),
    (
        "training-no-merge",
        "dev",
        _with("training.hyperparameters.merge", "false"),
        "training.hyperparameters.merge: got 'false'; "
        "the workflow records the job's model folder as the servable model",
    ),
    (
        "training-multi-gpu-lora",
        "dev",
        _with(
            "training",
            {**VALID["training"], "instance_type": "ml.g5.12xlarge", "hyperparameters": {**_HPS, "method": "lora"}},
        ),
        "training.hyperparameters.method: got 'lora'; ml.g5.12xlarge x 1 (4 GPUs) runs torchrun, which train.py "
        "supports for method qlora only",
    ),
    (
        "training-multi-node-full",
        "dev",
        _with("training", {**VALID["training"], "instance_count": 2, "hyperparameters": {**_HPS, "method": "full"}}),
        "training.hyperparameters.method: got 'full'; ml.g5.2xlarge x 2 (2 GPUs) runs torchrun",
    ),
    (
        "training-fsdp-one-gpu",
        "dev",
        _with("training.hyperparameters.fsdp", "true"),
        "training.hyperparameters.fsdp: got 'true'; FSDP shards the model over several GPUs and ml.g5.2xlarge x 1",
    ),
    (
        "training-torch-distributed-by-hand",
        "dev",
        _with("training.hyperparameters.sagemaker_torch_distributed_enabled", "true"),
        "training.hyperparameters.sagemaker_torch_distributed_enabled: set by the stack from training.instance_type",
    ),
    (
        "training-isolation-without-model",
        "dev",
        _with("training.network_isolation", True),
        "training.base_model_key: missing; network_isolation: true needs the base model",
    ),
    (
        "training-base-model-key",
        "dev",
        _with("training.base_model_key", "models/llama/"),
        "training.base_model_key: got 'models/llama/'; must match",
    ),
    (
        "training-subnets-without-groups",
        "dev",
        _with("training.subnet_ids", ["subnet-0123456789abcdef0"]),
        "training.security_group_ids: empty; a VPC config needs both",
    ),
    ("training-bad-subnet", "dev", _with("training.subnet_ids", ["vpc-123"]), "training.subnet_ids[0]: got 'vpc-123'"),
    (
        "training-prefix-too-long",
        "dev",
        _with("training.job_name_prefix", "a" * 27),
        "training.job_name_prefix: got 'aaaaaaaaaaaaaaaaaaaaaaaaaaa'; at most 26 characters",
    ),
    (
        "isolated-without-base-model",
        "dev",
        _isolated(),
        "training.base_model_key: missing; network.isolated: true needs the base model as an S3 `model` channel",
    ),
    (
        "isolated-hub-model-id",
        "dev",
        _isolated(**{**_READY, "training__hyperparameters__model_id": "TinyLlama/TinyLlama-1.1B-Chat-v1.0"}),
        "training.hyperparameters.model_id: got 'TinyLlama/TinyLlama-1.1B-Chat-v1.0'; a Hugging Face hub id needs the "
        "internet",
    ),
    *(
        [
            (
                "isolated-with-pruning",
                "dev",
                _isolated(**{**_READY, "pruning__enabled": True}),
                "pruning.enabled: got true; the Pruning stack downloads models from the Hugging Face hub",
            )
        ]
        if "pruning" in VALID
        else []
    ),
    (
        "isolated-without-image",
        "dev",
        _isolated(**{**_READY, "training__image_repository": None}),
        "training.image_uri: missing; network.isolated: true: script mode pip-installs training_code/qlora/"
        "requirements.txt, which needs the internet",
    ),
    (
        "training-isolation-without-image",
        "dev",
        _with("training", {**VALID["training"], "network_isolation": True, "base_model_key": "base-models/llama/"}),
        "training.image_uri: missing; network_isolation: true: script mode pip-installs",
    ),
    (
        "training-two-images",
        "dev",
        _with(
            "training",
            {
                **VALID["training"],
                "image_repository": "r:1",
                "image_uri": "123456789012.dkr.ecr.us-east-1.amazonaws.com/r:1",
            },
        ),
        "training.image_repository: set together with image_uri; keep one of them",
    ),
    (
        "training-image-repository-without-tag",
        "dev",
        _with("training.image_repository", "llm-inf2-training"),
        "training.image_repository: got 'llm-inf2-training'; must match",
    ),
    (
        "isolated-training-vpc",
        "dev",
        _isolated(
            **_READY,
            training__subnet_ids=["subnet-0123456789abcdef0"],
            training__security_group_ids=["sg-0123456789abcdef0"],
        ),
        "training.subnet_ids: set the VPC under network:",
    ),
    (
        "network-vpc-one-subnet",
        "dev",
        _isolated(network__vpc_id="vpc-0123456789abcdef0", network__subnet_ids=["subnet-0123456789abcdef0"]),
        "network.subnet_ids: got 1; an existing VPC needs at least 2 private subnets",
    ),
    (
        "network-subnets-without-vpc",
        "dev",
        _isolated(network__subnet_ids=["subnet-0123456789abcdef0"] * 2),
        "network.subnet_ids: needs vpc_id",
    ),
    (
        "network-vpc-not-isolated",
        "dev",
        _with("network.vpc_id", "vpc-0123456789abcdef0"),
        "network.vpc_id: only used with isolated: true",
    ),
    (
        "network-prefix-list-not-isolated",
        "dev",
        _with("network.s3_prefix_list_id", "pl-63a5400a"),
        "network.s3_prefix_list_id: only used with isolated: true",
    ),
    ("network-bad-vpc-id", "dev", _isolated(network__vpc_id="vpc-xyz"), "network.vpc_id: got 'vpc-xyz'; must match"),
    # serving.backend: which architectures, images and settings each backend takes (stacks/config/serving.py)
    (
        "backend-unknown",
        "dev",
        _with("serving.backend", "tgi"),
        "serving.backend: got 'tgi'; allowed: 'lmi_neuronx', 'vllm_neuronx'",
    ),
    (
        "vllm-tp-over-cores",
        "dev",
        _staging(serving__instance_type="ml.inf2.xlarge", serving__neuron__tensor_parallel_size=4),
        "serving.neuron.tensor_parallel_size: got 4; ml.inf2.xlarge has 2 NeuronCores",
    ),
    (
        "vllm-weights-over-memory",
        "dev",
        _staging_record("test/qwen-70b", parameters=70_000_000_000),
        "serving.neuron.tensor_parallel_size: got 2; 140.0 GB of 16-bit weights (test/qwen-70b) exceed 80% of "
        "2 x 16 GB",
    ),
    (
        "vllm-with-lmi-options",
        "dev",
        _staging(serving__lmi={"dtype": "bf16"}),
        "serving.lmi: only for backend lmi_neuronx; backend is vllm_neuronx: remove the section",
    ),
    (
        "lmi-with-neuron-options",
        "dev",
        _with("serving.neuron", {"batch_size": 8}),
        "serving.neuron: only for backend vllm_neuronx; backend is lmi_neuronx: remove the section",
    ),
    (
        "vllm-with-lmi-image",
        "dev",
        _staging(serving__image="lmi_neuronx"),
        "serving.image: got 'lmi_neuronx'; backend vllm_neuronx runs vllm_neuronx (or null)",
    ),
    (
        "vllm-volume-too-small",
        "dev",
        _staging(serving__volume_size_gb=20),
        "serving.volume_size_gb: got 20; the compiled model is mounted from S3 onto the volume: needs >= 41 GB "
        "(2 x 15.2 GB weights + 10)",
    ),
    # instance types against botocore's SageMaker enums (the API shape each one is sent in)
    (
        "training-type-not-sagemakers",
        "dev",
        _changed(SHIPPED, training__instance_type="ml.g5.3xlarge"),
        "dev.yaml: training.instance_type: got 'ml.g5.3xlarge'; not a SageMaker TrainingInstanceType (botocore's "
        "model): closest: ml.g5.xlarge, ml.g5.8xlarge, ml.g5.4xlarge",
    ),
    (
        "compile-type-not-sagemakers",
        "dev",
        _staging(training__neuron_compile__instance_type="ml.r5.5xlarge"),
        "dev.yaml: training.neuron_compile.instance_type: got 'ml.r5.5xlarge'; not a SageMaker TrainingInstanceType",
    ),
    (
        "trial-type-not-sagemakers",
        "dev",
        _with("pruning.trial_instance_type", "ml.c5.xxlarge"),
        "dev.yaml: pruning.trial_instance_type: got 'ml.c5.xxlarge'; not a SageMaker TrainingInstanceType",
    ),
    (
        "endpoint-type-not-sagemakers",
        "dev",
        _with(
            "pruning.base_endpoint", {"model_key": "pruning/run/base/model.tar.gz", "instance_type": "ml.c5.3xlarge"}
        ),
        "dev.yaml: pruning.base_endpoint.instance_type: got 'ml.c5.3xlarge'; not a SageMaker "
        "ProductionVariantInstanceType (botocore's model): closest: ",
    ),
    # the served model is the lock the promotion writes: a prefix typed into the YAML is refused
    (
        "model-prefix-typed-into-the-yaml",
        "dev",
        _changed(SHIPPED, serving__model_prefix="models/x/"),
        "dev.yaml: serving.model_prefix: got 'models/x/'; the served model is config/dev.model.json now, which only "
        "the promotion writes: remove this line and run `make promote TO=dev VERSION=<model package ARN>`",
    ),
    (
        "graph-prefix-typed-into-the-yaml",
        "dev",
        _changed(SHIPPED, serving__compiled_graph_prefix="models/x/neuron/"),
        "dev.yaml: serving.compiled_graph_prefix: got 'models/x/neuron/'; the served model is config/dev.model.json "
        "now, which only the promotion writes",
    ),
    (
        "pruning-dims-not-the-models",
        "dev",
        _with("pruning.intermediate_size", 3072),
        "pruning.intermediate_size: intermediate_size is 3072, the model's config.json says 1536 "
        "(sentence-transformers/all-MiniLM-L6-v2)",
    ),
    (
        "lmi-compile-on-a-cpu-instance",
        "dev",
        _with("training.neuron_compile", {"instance_type": "ml.r5.4xlarge"}),
        "training.neuron_compile.instance_type: got 'ml.r5.4xlarge'; LMI NeuronX's partition loads the model onto "
        "NeuronCores (DJL 0.30 calls to_neuron; CPU-only compiling needs Neuron SDK 2.21, the image has 2.20.1) and "
        "SageMaker training has them on ml.trn1 (NeuronCore-v2, as ml.inf2): use ml.trn1.2xlarge or "
        "ml.trn1.32xlarge or ml.trn1n.32xlarge",
    ),
    (
        "lmi-compile-without-the-host-memory-for-the-model",
        "dev",
        _with("training.hyperparameters.model_id", "NousResearch/Llama-2-7b-chat-hf"),
        "training.neuron_compile.instance_type: got 'ml.trn1.2xlarge' (32 GiB host RAM); compiling the 6.74B-parameter "
        "NousResearch/Llama-2-7b-chat-hf needs ~101 GiB (15 GiB per billion parameters, ~100 GB for a 7B model): use "
        "ml.trn1.32xlarge or ml.trn1n.32xlarge",
    ),
    (
        "vllm-export-without-the-host-memory-for-the-model",
        "dev",
        _staging(training__neuron_compile__instance_type="ml.m5.2xlarge"),
        "training.neuron_compile.instance_type: got 'ml.m5.2xlarge' (32 GiB host RAM); optimum-cli export neuron of "
        "the 7.62B-parameter Qwen/Qwen2.5-7B-Instruct needs ~61 GiB (8 GiB per billion parameters, >= 64 GiB for a "
        "7-8B model): use ml.c6i.8xlarge (64 GiB), ml.m5.4xlarge (64 GiB), ml.m6i.4xlarge (64 GiB)",
    ),
    (
        "vllm-export-on-a-host-of-unknown-memory",
        "dev",
        _staging(training__neuron_compile__instance_type="ml.p3.2xlarge"),
        "training.neuron_compile.instance_type: got 'ml.p3.2xlarge', whose host memory stacks/config/hosts.py does "
        "not list, so the export's fit cannot be checked: use a CPU type with >= 61 GiB, e.g. ml.c6i.8xlarge (64 GiB)",
    ),
    (
        "lmi-scale-out-faster-than-an-instance-loads",
        "dev",
        _with("serving.autoscaling.scale_out_cooldown_seconds", 300),
        "serving.autoscaling.scale_out_cooldown_seconds: got 300; a new instance loads the compiled model for up to "
        "serving.lmi.model_loading_timeout (600 s) before it takes traffic, and a shorter cooldown adds more "
        "instances on the same load: use >= 600",
    ),
    # A gated or private hub model: the job's token comes from a Secrets Manager secret the config names.
    (
        "gated-base-without-token-or-copy",
        "dev",
        _staging_record("test/gated-7b", gated=True),
        "models/gated-7b.yaml: gated: true), and the training job has no token: set training.hub_token_secret: "
        "<secret ARN> (a Secrets "
        "Manager secret holding a hub token with access) or copy the weights into the bucket with "
        "`make base-model MODEL=test/gated-7b UPLOAD=dev`",
    ),
    (
        "hub-token-secret-partial-arn",
        "dev",
        _with("training.hub_token_secret", SECRET.removesuffix("-AbC123")),
        "(the full ARN (the name's -XXXXXX suffix too) of a Secrets Manager secret holding a hub token) (Secrets "
        "Manager GetSecretValue SecretId: 1..2048 characters)",
    ),
    (
        "hub-token-secret-not-an-arn",
        "dev",
        _with("training.hub_token_secret", "llm-inf2/hub-token"),
        "training.hub_token_secret: got 'llm-inf2/hub-token'; must match arn:aws[a-z-]*:secretsmanager:",
    ),
    (
        "hub-token-secret-longer-than-an-environment-value",
        "dev",
        _with("training.hub_token_secret", SECRET.replace("hub-token", "h" * 480)),
        "training.hub_token_secret: got 549 characters; the job is given the ARN as an environment value: at most "
        "512 (SageMaker CreateTrainingJob Environment value): rename the secret shorter",
    ),
    (
        "hub-token-key-as-an-alias",
        "dev",
        _changed(VALID, training__hub_token_secret=SECRET, training__hub_token_kms_key="alias/hub-token"),
        "training.hub_token_kms_key: got 'alias/hub-token'; must match",
    ),
    (
        "hub-token-key-without-secret",
        "dev",
        _with("training.hub_token_kms_key", SECRET_KEY),
        "training.hub_token_kms_key: set without hub_token_secret, whose key it names: remove it or name the secret",
    ),
    (
        "hub-token-key-in-another-region",
        "dev",
        _changed(
            VALID, training__hub_token_secret=SECRET, training__hub_token_kms_key=SECRET_KEY.replace("east", "west")
        ),
        "training.hub_token_kms_key: in us-west-1, the secret in us-east-1; Secrets Manager encrypts a secret with a "
        "key of the secret's own region: name that key",
    ),
    (
        "hub-token-with-network-isolation",
        "dev",
        _changed(
            VALID,
            training__network_isolation=True,
            training__base_model_key="base-models/tinyllama-1.1b-chat-v1.0/",
            training__hub_token_secret=SECRET,
        ),
        "training.hub_token_secret: set with network_isolation: true; an isolated job reaches neither the hub nor "
        "Secrets Manager: remove it (the `model` channel under base_model_key holds the base)",
    ),
    (
        "isolated-with-hub-token",
        "dev",
        _isolated(**{**_READY, "training__hub_token_secret": SECRET}),
        "training.hub_token_secret: set; network.isolated: true jobs reach neither the hub nor Secrets Manager: "
        "remove it (training.base_model_key supplies the model)",
    ),
    (
        "compile-without-serving",
        "dev",
        _without("serving", base=_with("training.neuron_compile", {"enabled": True})),
        "training.neuron_compile.enabled: got true with serving.backend None; the compile step compiles for a "
        "serving profile that serves a compiled model (vllm_neuronx, lmi_neuronx): set a serving section or "
        "enabled: null",
    ),
]


# prod's own file (TP 8 on ml.inf2.24xlarge), written as prod.yaml
PROD_CASES = [
    (
        "lmi-compile-without-the-memory-for-the-model",
        "prod",
        _with("training.neuron_compile", {"instance_type": "ml.trn1.2xlarge"}, base=PROD_VALID),
        "training.neuron_compile.instance_type: got 'ml.trn1.2xlarge' (2 NeuronCores); the partition loads "
        "serving.lmi.tensor_parallel_degree 8 shards, one per NeuronCore: use ml.trn1.32xlarge or ml.trn1n.32xlarge",
    ),
    (
        "lmi-compile-with-a-tp-trn1-does-not-run",
        "prod",
        _with("serving.lmi.tensor_parallel_degree", 4, base=PROD_VALID),
        "serving.lmi.tensor_parallel_degree: got 4; the partition runs on Trn1, whose Neuron runtime runs TP 1, 2, 8, "
        "32 (Inf2: 1, 2, 4, 8, 24): use 1, 2, 8, or set training.neuron_compile.enabled: false to compile at start-up",
    ),
]


def run_app(config_dir: Path, env_name: str) -> subprocess.CompletedProcess:
    env = dict(os.environ)
    # What `npx cdk synth` hands the app (cdk.json's feature flags included), plus the case's env and folder.
    env["CDK_CONTEXT_JSON"] = json.dumps({**cli_context(), "env": env_name, "config_dir": str(config_dir)})
    env["CDK_OUTDIR"] = str(config_dir / "cdk.out")
    return subprocess.run(
        [sys.executable, "app.py"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120, check=False
    )


def run_in_process(config_dir: Path, env_name: str) -> subprocess.CompletedProcess:
    """app.run, what `python app.py` runs after reading the CLI's context, in this process: each case's exit code
    and stderr without a Python start-up and config import per case; the process itself runs in
    test_entry_point_process_fails_with_one_line."""
    import app

    context = {**cli_context(), "env": env_name, "config_dir": str(config_dir)}
    stderr = io.StringIO()
    with contextlib.redirect_stderr(stderr):
        code = app.run(context, context=context, outdir=str(config_dir / "cdk.out"))
    return subprocess.CompletedProcess(["app.run"], code, "", stderr.getvalue())


def write_case(config_dir: Path, content, env_name: str = "dev") -> None:
    """config_dir/<env>.yaml from `content`, and its lock when the content names one (LOCK)."""
    config_dir.mkdir(parents=True, exist_ok=True)
    with_catalog(config_dir)
    target = config_dir / f"{env_name}.yaml"
    if content is None:
        content = VALID
    if isinstance(content, bytes):
        target.write_bytes(content)
    elif isinstance(content, str):
        target.write_text(content)
    else:
        content = dict(content)
        lock = content.pop(LOCK, None)
        if RECORD in content:
            add_record(config_dir, **content.pop(RECORD))
        target.write_text(yaml.safe_dump(content, sort_keys=False))
        if lock is not None:
            (config_dir / f"{env_name}.model.json").write_text(json.dumps(lock, indent=2, sort_keys=True) + "\n")


@pytest.mark.parametrize(("case", "env_name", "content", "expected"), CASES, ids=[c[0] for c in CASES])
def test_malformed_config_fails_with_one_line(tmp_path, case, env_name, content, expected):
    write_case(tmp_path, content)
    result = run_in_process(tmp_path, env_name)
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("config error: ")
    assert expected in lines[0]
    assert "Traceback" not in result.stderr


@pytest.mark.parametrize(("case", "env_name", "content", "expected"), PROD_CASES, ids=[c[0] for c in PROD_CASES])
def test_malformed_prod_config_fails_with_one_line(tmp_path, case, env_name, content, expected):
    write_case(tmp_path, content, env_name)
    result = run_in_process(tmp_path, env_name)
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("config error: "), result.stderr
    assert expected in lines[0]


# The entry point as the CLI starts it (context from CDK_CONTEXT_JSON, a fresh interpreter, no traceback, no
# import warning on stderr) on a load-time refusal of dev and of prod and on the build-time one.
PROCESS_CASES = [CASES[0], PROD_CASES[0], *(c for c in CASES if c[0] in {"region-without-images"})]


@pytest.mark.parametrize(("case", "env_name", "content", "expected"), PROCESS_CASES, ids=[c[0] for c in PROCESS_CASES])
def test_entry_point_process_fails_with_one_line(tmp_path, case, env_name, content, expected):
    write_case(tmp_path, content, env_name)
    result = run_app(tmp_path, env_name)
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("config error: ")
    assert expected in lines[0]
    assert "Traceback" not in result.stderr


def test_missing_optional_section_takes_defaults(tmp_path):
    from stacks.config import DataConfig, load_config

    write_case(tmp_path, _without("data"))
    assert load_config("dev", tmp_path).data == DataConfig()


# Refused after load_config, while the app builds the stacks (the image table has no such region).
BUILD_TIME = {"region-without-images"}


@pytest.mark.parametrize(
    ("case", "env_name", "content", "expected"),
    [c for c in CASES if c[0] not in BUILD_TIME],
    ids=[c[0] for c in CASES if c[0] not in BUILD_TIME],
)
def test_malformed_config_raises_the_same_line_in_process(tmp_path, case, env_name, content, expected):
    """load_config, what app.py runs first, raises the line the entry point prints (no process per case)."""
    from stacks.config import ConfigError, load_config

    write_case(tmp_path, content)
    with pytest.raises(ConfigError) as caught:
        load_config(env_name, tmp_path)
    assert expected in str(caught.value) and "\n" not in str(caught.value)
