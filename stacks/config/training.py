"""Settings of the QLoRA training stack: the SageMaker job shape and the hyperparameters it starts with."""

from __future__ import annotations

from dataclasses import dataclass

from . import aws_limits as aws
from .errors import ConfigError
from .instance_types import TRAINING, check_instance_type
from .schema import setting

_IMAGE_REFERENCE = r"(:[\w.-]+|@sha256:[0-9a-f]{64})"
OWN_REPOSITORY_PATTERN = r"[a-z0-9]+([._/-][a-z0-9]+)*" + _IMAGE_REFERENCE
OFFLINE_IMAGE = (
    "script mode pip-installs training_code/qlora/requirements.txt, which needs the internet: push an "
    "image with them baked in (README, Training) and set training.image_repository (<repo>:<tag> in "
    "this account's ECR) or training.image_uri"
)
ECR_IMAGE_PATTERN = r"\d{12}\.dkr\.ecr\.[a-z0-9-]+\.amazonaws\.com(\.cn)?/[a-z0-9._/-]+(:[\w.-]+|@sha256:[0-9a-f]{64})"
# CloudWatch Logs accepts only these retention periods: botocore's model has no enum for them, its Days shape's
# documentation lists them ("Possible values are: 1, 3, ...", aws_limits.LOG_RETENTION's citation).
LOG_RETENTION_DAYS = (
    1,
    3,
    5,
    7,
    14,
    30,
    60,
    90,
    120,
    150,
    180,
    365,
    400,
    545,
    731,
    1096,
    1827,
    2192,
    2557,
    2922,
    3288,
    3653,
)
# The hub token's secret by its full ARN (the six characters Secrets Manager appends to the name included): the job
# role is granted exactly this resource, which a partial ARN or a name would not match.
_ARN_HEAD = r"arn:aws[a-z-]*:{}:[a-z]{{2}}(-[a-z]+)+-\d:\d{{12}}:"
SECRET_ARN_PATTERN = _ARN_HEAD.format("secretsmanager") + (
    rf"secret:[A-Za-z0-9/_+=.@-]{{1,{aws.setting_range(aws.SECRET_NAME)[1]}}}-[A-Za-z0-9]{{6}}"
)
# A KMS key by its key ARN (a single- or multi-Region key id): IAM matches Decrypt on the key, never on an alias.
KMS_KEY_ARN_PATTERN = _ARN_HEAD.format("kms") + r"key/(mrk-[0-9a-f]{32}|[0-9a-f]{8}(-[0-9a-f]{4}){3}-[0-9a-f]{12})"
# Job names are `<prefix>-<32 hex>-<attempt>-<retry>` and SageMaker allows TrainingJobName's botocore maximum.
_JOB_NAME_MAX = aws.setting_range(aws.TRAINING_JOB_NAME)[1]
MAX_JOB_NAME_PREFIX = _JOB_NAME_MAX - (1 + 32 + 4)
PREFIX_LIMIT = (
    f"at most {MAX_JOB_NAME_PREFIX} characters so job names fit SageMaker's {_JOB_NAME_MAX}"
    + aws.TRAINING_JOB_NAME.note()
)
# GPUs per instance of the multi-GPU SageMaker training types; any other type counts as one GPU.
MULTI_GPU_TYPES = {
    **dict.fromkeys(
        (
            "ml.g4dn.12xlarge",
            "ml.g5.12xlarge",
            "ml.g5.24xlarge",
            "ml.g6.12xlarge",
            "ml.g6.24xlarge",
            "ml.g6e.12xlarge",
            "ml.g6e.24xlarge",
            "ml.p3.8xlarge",
        ),
        4,
    ),
    **dict.fromkeys(
        (
            "ml.g5.48xlarge",
            "ml.g6.48xlarge",
            "ml.g6e.48xlarge",
            "ml.p3.16xlarge",
            "ml.p3dn.24xlarge",
            "ml.p4d.24xlarge",
            "ml.p4de.24xlarge",
            "ml.p5.48xlarge",
            "ml.p5e.48xlarge",
            "ml.p5en.48xlarge",
        ),
        8,
    ),
}
# Script-mode switches the stack sets from the job shape (README, Training); never config or execution input.
TORCH_DISTRIBUTED = "sagemaker_torch_distributed_enabled"
SEED_HYPERPARAMETERS = {
    "model_id": "NousResearch/Llama-2-7b-chat-hf",
    "epochs": "1",
    "learning_rate": "0.0002",
    "per_device_batch_size": "4",
    "gradient_accumulation_steps": "1",
    "max_seq_length": "512",
    "lora_r": "64",
    "lora_alpha": "16",
    "lora_dropout": "0.1",
    "compute_dtype": "bfloat16",
    "merge": "true",
}


def check_log_retention(days: int, source: str, field: str) -> None:
    """CloudWatch Logs accepts only the periods of LOG_RETENTION_DAYS."""
    if days not in LOG_RETENTION_DAYS:
        allowed = ", ".join(map(str, LOG_RETENTION_DAYS))
        raise ConfigError(source, field, f"got {days}; allowed: {allowed}{aws.LOG_RETENTION.note()}")


@dataclass(frozen=True)
class NeuronCompileConfig:
    """The ahead-of-time Neuron compile step after the merge, in the serving image: vllm_neuronx's `optimum-cli
    export neuron` (shape from serving.neuron) on a CPU instance; lmi_neuronx's `partition` (shape from
    serving.lmi) on ml.trn1, which has the NeuronCores it loads onto (training jobs cannot use ml.inf2)."""

    enabled: bool | None = setting(None, hint="null: on when the serving backend serves a compiled model")
    instance_type: str = setting(
        "ml.r5.4xlarge",
        pattern=r"ml\.[a-z0-9]+\.[a-z0-9]+",
        hint="vllm_neuronx: CPU, >= 64 GiB host RAM for 7-8B models; lmi_neuronx: ml.trn1.*",
    )
    max_runtime_hours: int = setting(4, le=72, aws=aws.MAX_RUNTIME_HOURS)  # project: a compile takes an hour or two
    # Project: the training job's range (below).
    volume_size_gb: int = setting(
        200, ge=5, le=16384, hint="the merged model plus the compiled one", aws=aws.TRAINING_VOLUME_SIZE
    )

    def check(self, source: str, path: str) -> None:
        check_instance_type(self.instance_type, TRAINING, source, f"{path}.instance_type")


@dataclass(frozen=True)
class QualityGateConfig:
    """The registry's gate: a run whose merged model's eval loss is not below the base's by `min_improvement`
    (the job's `eval_loss_improvement` metric, base - merged, on the same held-out tokens) is registered
    Rejected and recorded nowhere for serving, any other PendingManualApproval; a person approves in the
    registry."""

    min_improvement: float = setting(0.01, ge=-10.0, le=10.0, hint="eval loss (nats) the merged model must gain")
    # The benchmark job's `benchmark_max_drop_points` (training.benchmark): base minus merged score of each task's
    # primary metric, in points (percentage points for accuracies); a larger drop registers the version Rejected.
    max_benchmark_drop: float | None = setting(
        None,
        ge=0.0,
        le=100.0,
        hint="points a benchmark task's score may fall below the base's; null when benchmark.tasks is empty",
    )


@dataclass(frozen=True)
class BenchmarkConfig:
    """The benchmark job after the merge: lm-evaluation-harness on the merged model and its base, on tasks whose
    files are staged in the artifact bucket under `staged_prefix`<task>/ (make eval-data TASK=<task> ENV=<env>);
    the job has no internet in isolated environments, so it reads no hub."""

    tasks: list[str] = setting(
        [], pattern=r"[A-Za-z0-9][A-Za-z0-9_.-]*", hint="lm-eval task names, each staged; []: no benchmark job"
    )
    staged_prefix: str = setting(
        "eval-data/", pattern=r"([A-Za-z0-9!_.*'()=-]+/)+", hint="the bucket folder make eval-data writes tasks to"
    )
    instance_type: str = setting("ml.g5.xlarge", pattern=r"ml\.[a-z0-9]+\.[a-z0-9]+", hint="holds both models")
    max_runtime_hours: int = setting(4, le=72, aws=aws.MAX_RUNTIME_HOURS)  # project: the merge's bound
    volume_size_gb: int = setting(
        100, ge=5, le=16384, hint="the merged model and the base", aws=aws.TRAINING_VOLUME_SIZE
    )

    def check(self, source: str, path: str) -> None:
        check_instance_type(self.instance_type, TRAINING, source, f"{path}.instance_type")
        repeated = sorted({task for task in self.tasks if self.tasks.count(task) > 1})
        if repeated:
            raise ConfigError(source, f"{path}.tasks", f"lists {repeated[0]!r} twice; name each task once")


@dataclass(frozen=True)
class TrainingConfig:
    """One training job shape per environment; executions may override hyperparameters, nothing else."""

    instance_type: str = setting("ml.g5.2xlarge", pattern=r"ml\.[a-z0-9]+\.[a-z0-9]+", hint="e.g. ml.g5.2xlarge")
    # Project: at least one instance (0 is for instance groups, which the job does not use); at most 8, a guard
    # against a typo's bill (torchrun spans instance_count x GPUs).
    instance_count: int = setting(1, ge=1, le=8, aws=aws.TRAINING_INSTANCE_COUNT)
    # Project: 5 GB to 16 TiB (16384 GB, the largest EBS gp2 volume SageMaker attaches); the API sets no range.
    volume_size_gb: int = setting(100, ge=5, le=16384, aws=aws.TRAINING_VOLUME_SIZE)
    max_runtime_hours: int = setting(24, aws=aws.MAX_RUNTIME_HOURS)
    spot: bool = setting(False)
    # Project: the wait (spot capacity plus run time) is capped like the run time, 28 days.
    max_wait_hours: int | None = setting(
        None, le=672, hint="managed spot only; >= max_runtime_hours", aws=aws.MAX_WAIT_HOURS
    )
    network_isolation: bool = setting(False)
    base_model_key: str | None = setting(
        None, pattern=r"base-models/[A-Za-z0-9._/-]+/", hint="a folder in the artifact bucket, e.g. base-models/llama/"
    )
    hub_token_secret: str | None = setting(
        None,
        pattern=SECRET_ARN_PATTERN,
        hint="the full ARN (the name's -XXXXXX suffix too) of a Secrets Manager secret holding a hub token",
        aws=aws.HUB_TOKEN_SECRET,
    )
    hub_token_kms_key: str | None = setting(
        None,
        pattern=KMS_KEY_ARN_PATTERN,
        hint="the secret's customer-managed KMS key ARN; null: the secret uses aws/secretsmanager",
        aws=aws.SECRET_KMS_KEY,
    )
    subnet_ids: list[str] = setting([], pattern=r"subnet-[0-9a-f]{8,17}", aws=aws.TRAINING_SUBNETS)
    security_group_ids: list[str] = setting([], pattern=r"sg-[0-9a-f]{8,17}", aws=aws.TRAINING_SECURITY_GROUPS)
    image_uri: str | None = setting(
        None, pattern=ECR_IMAGE_PATTERN, hint="an ECR image URI; null: the pinned table", aws=aws.TRAINING_IMAGE
    )
    image_repository: str | None = setting(
        None, pattern=OWN_REPOSITORY_PATTERN, hint="<repo>:<tag> in the deploying account's ECR (same region)"
    )
    job_name_prefix: str | None = setting(
        None, pattern=r"[a-z][a-z0-9]*(-[a-z0-9]+)*", hint="lower-case; null: <app_name>-<env>"
    )
    capacity_retries: int = setting(2, ge=0, le=5, hint="new jobs after an InsufficientCapacity failure")
    capacity_backoff_seconds: int = setting(600, ge=60, le=7200, hint="first wait; doubles per retry")
    log_retention_days: int = setting(30, aws=aws.LOG_RETENTION)  # check_log_retention: the list
    hyperparameters: dict[str, str] = setting(dict(SEED_HYPERPARAMETERS))
    neuron_compile: NeuronCompileConfig = setting(NeuronCompileConfig())
    quality_gate: QualityGateConfig = setting(QualityGateConfig())
    benchmark: BenchmarkConfig = setting(BenchmarkConfig())

    def check(self, source: str, path: str) -> None:
        def fail(name: str, problem: str) -> None:
            raise ConfigError(source, f"{path}.{name}" if path else name, problem)

        check_instance_type(self.instance_type, TRAINING, source, f"{path}.instance_type" if path else "instance_type")
        check_log_retention(
            self.log_retention_days, source, f"{path}.log_retention_days" if path else "log_retention_days"
        )
        if self.max_wait_hours is not None and not self.spot:
            fail("max_wait_hours", f"got {self.max_wait_hours}; only managed spot (spot: true) waits, set it to null")
        if self.spot and self.max_wait_hours is not None and self.max_wait_hours < self.max_runtime_hours:
            fail("max_wait_hours", f"got {self.max_wait_hours}; must be >= max_runtime_hours {self.max_runtime_hours}")
        if self.job_name_prefix is not None and len(self.job_name_prefix) > MAX_JOB_NAME_PREFIX:
            fail("job_name_prefix", f"got {self.job_name_prefix!r}; {PREFIX_LIMIT}")
        if bool(self.subnet_ids) != bool(self.security_group_ids):
            missing = "security_group_ids" if self.subnet_ids else "subnet_ids"
            fail(missing, "empty; a VPC config needs both subnet_ids and security_group_ids")
        if self.network_isolation and self.base_model_key is None:
            fail("base_model_key", "missing; network_isolation: true needs the base model as an S3 `model` channel")
        found = self.hub_token_problem()
        if found:
            fail(*found)
        if self.image_uri is not None and self.image_repository is not None:
            fail("image_repository", "set together with image_uri; keep one of them")
        if self.network_isolation and not self.has_own_image:
            fail("image_uri", f"missing; network_isolation: true: {OFFLINE_IMAGE}")
        if not self.network_isolation and self.base_model_key is None and "model_id" not in self.hyperparameters:
            fail("hyperparameters.model_id", "missing; set a Hugging Face model id or base_model_key")

        from ..code_contract.qlora import hyperparameter_problem, merge_problem

        for name, value in self.hyperparameters.items():
            problem = hyperparameter_problem(name, value) or (merge_problem(value) if name == "merge" else None)
            if problem:
                fail(f"hyperparameters.{name}", problem)
        found = self.distribution_problem(self.hyperparameters)
        if found:
            fail(f"hyperparameters.{found[0]}", found[1])
        found = self.benchmark_problem()
        if found:
            fail(*found)

    def benchmark_problem(self) -> tuple[str, str] | None:
        """(name, problem) when the benchmark and its gate are not set together: scores nobody judges, or a
        limit on scores nobody computes."""
        drop = self.quality_gate.max_benchmark_drop
        if self.benchmark.tasks and drop is None:
            return "quality_gate.max_benchmark_drop", (
                f"missing; benchmark.tasks runs {', '.join(self.benchmark.tasks)} for the gate: set the points a "
                "task's score may fall below the base's (e.g. 2.0)"
            )
        if not self.benchmark.tasks and drop is not None:
            return "quality_gate.max_benchmark_drop", (
                f"got {drop:g} with no benchmark.tasks; name tasks staged under benchmark.staged_prefix "
                "(make eval-data TASK=<task> ENV=<env>) or set it to null"
            )
        return None

    def hub_token_problem(self) -> tuple[str, str] | None:
        """(name, problem) when the hub token's settings cannot work together."""
        secret, key = self.hub_token_secret, self.hub_token_kms_key
        if key is not None and secret is None:
            return "hub_token_kms_key", "set without hub_token_secret, whose key it names: remove it or name the secret"
        if secret is not None and self.network_isolation:
            return "hub_token_secret", (
                "set with network_isolation: true; an isolated job reaches neither the hub nor Secrets Manager: "
                "remove it (the `model` channel under base_model_key holds the base)"
            )
        longest = aws.map_value_length(aws.TRAINING_ENVIRONMENT)
        if secret is not None and len(secret) > longest:
            return "hub_token_secret", (
                f"got {len(secret)} characters; the job is given the ARN as an environment value: at most {longest} "
                f"({aws.TRAINING_ENVIRONMENT.label} value): rename the secret shorter"
            )
        if key is not None and key.split(":")[3] != secret.split(":")[3]:
            return "hub_token_kms_key", (
                f"in {key.split(':')[3]}, the secret in {secret.split(':')[3]}; Secrets Manager encrypts a secret "
                "with a key of the secret's own region: name that key"
            )
        return None

    @property
    def world_size(self) -> int:
        """torchrun processes of one job: instances times GPUs per instance."""
        return self.instance_count * MULTI_GPU_TYPES.get(self.instance_type, 1)

    @property
    def distributed(self) -> bool:
        """More than one GPU: the stack launches train.py with torchrun (DDP, or FSDP with fsdp true)."""
        return self.world_size > 1

    def distribution_problem(self, hyperparameters: dict[str, str]) -> tuple[str, str] | None:
        """(name, problem) for hyperparameters the job shape cannot run; `hyperparameters` as the job gets them."""
        from ..code_contract.qlora import parse_bool

        shape = f"{self.instance_type} x {self.instance_count} ({self.world_size} GPU{'s' * self.distributed})"
        if TORCH_DISTRIBUTED in hyperparameters:
            return TORCH_DISTRIBUTED, (
                "set by the stack from training.instance_type and instance_count (on for more than one GPU); remove it"
            )
        method = hyperparameters.get("method", "qlora")
        if self.distributed and method != "qlora":
            return "method", (
                f"got {method!r}; {shape} runs torchrun, which train.py supports for method qlora only: "
                "use qlora, or one single-GPU instance"
            )
        fsdp = hyperparameters.get("fsdp", "false")
        if not self.distributed and parse_bool(fsdp):
            return "fsdp", (
                f"got {fsdp!r}; FSDP shards the model over several GPUs and {shape} has one: set it "
                "false or use a multi-GPU instance_type / instance_count > 1"
            )
        return None

    @property
    def has_own_image(self) -> bool:
        """An image other than the pinned table's: the config's promise that it holds the requirements."""
        return self.image_uri is not None or self.image_repository is not None

    @property
    def max_wait_seconds(self) -> int | None:
        if not self.spot:
            return None
        return 3600 * (self.max_wait_hours or min(2 * self.max_runtime_hours, 672))
