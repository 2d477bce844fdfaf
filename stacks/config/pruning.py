"""The pruning section: NAS structural pruning of an encoder (state machine) and its base/pruned endpoints.

Off by default (`enabled: false`); an environment turns it on in its YAML. The tuning job's parameter
ranges are not configured here: they come from `training_code/nas/pruning/search_space.py` for the
`search_space` and model dimensions below, the same definition the trial script parses.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from . import aws_limits as aws
from .endpoint import AlarmConfig, AutoscalingConfig, RolloutConfig, check_variant
from .errors import ConfigError
from .instance_types import TRAINING, check_instance_type
from .schema import setting
from .training import ECR_IMAGE_PATTERN, check_log_retention

INSTANCE_TYPE = r"ml\.[a-z0-9]+\.[a-z0-9]+"
MODEL_KEY = r"([A-Za-z0-9!_.*'()=-]+/)+model\.tar\.gz"
# SageMaker's limit on the hyperparameters one tuning job searches (the tuning limits page aws_limits cites).
MAX_TUNED_PARAMETERS = 30
HYPERPARAMETER_NAME = re.compile(r"[a-z][a-z0-9-]{0,63}")
# Tuning job names are `<prefix>-<17-digit start time>-<retry>`, within HyperParameterTuningJobName's maximum.
_TUNING_NAME_MAX = aws.setting_range(aws.TUNING_JOB_NAME)[1]
MAX_PRUNING_PREFIX = _TUNING_NAME_MAX - (1 + 17 + 2)
SUPERNET_HYPERPARAMETERS = {
    "model-name-or-path": "sentence-transformers/all-MiniLM-L6-v2",
    "strategy": "kd",
    "epochs": "5",
    "teacher-epochs": "1",
    "rewire": "true",
    "learning-rate": "0.0001",
    "batch-size": "16",
    "max-length": "128",
}


# The config.json dimensions of hub models the super-network is known to start from (checked at synth against
# the typed num_layers/num_heads/intermediate_size; MiniLM's entry is tested against the shipped weights).
KNOWN_MODEL_CONFIGS = {
    "sentence-transformers/all-MiniLM-L6-v2": {
        "num_hidden_layers": 6,
        "num_attention_heads": 12,
        "intermediate_size": 1536,
    },
    "bert-base-cased": {"num_hidden_layers": 12, "num_attention_heads": 12, "intermediate_size": 3072},
    "bert-base-uncased": {"num_hidden_layers": 12, "num_attention_heads": 12, "intermediate_size": 3072},
}


@dataclass(frozen=True)
class EncoderEndpointConfig:
    """One encoder classifier (exported model.tar.gz with code/inference.py) behind the HF PyTorch container."""

    model_key: str = setting(
        pattern=MODEL_KEY, hint="the exported model.tar.gz in the artifact bucket (the state machine's output)"
    )
    instance_type: str = setting("ml.c5.xlarge", pattern=INSTANCE_TYPE, hint="CPU (ml.c*, ml.m*) or GPU (ml.g*)")
    initial_instance_count: int = setting(1, le=100, aws=aws.VARIANT_INSTANCE_COUNT)  # le: autoscaling's cap
    volume_size_gb: int | None = setting(
        None, hint="only for instance types without local storage", aws=aws.VARIANT_VOLUME_SIZE
    )
    # Not an AWS field: the container's SAGEMAKER_MODEL_SERVER_WORKERS; project: at most 64 workers.
    model_server_workers: int | None = setting(None, ge=1, le=64, hint="null: one per vCPU (the container default)")
    container_startup_health_check_timeout_seconds: int = setting(600, aws=aws.VARIANT_STARTUP_TIMEOUT)
    model_data_download_timeout_seconds: int = setting(600, aws=aws.VARIANT_DOWNLOAD_TIMEOUT)
    rollout: RolloutConfig = setting(RolloutConfig(maximum_execution_timeout_seconds=3600))
    autoscaling: AutoscalingConfig = setting(AutoscalingConfig(target_invocations_per_instance=600.0))
    alarms: AlarmConfig = setting(AlarmConfig(model_latency_p90_ms=500))

    @property
    def gpu(self) -> bool:
        return self.instance_type.split(".")[1].startswith(("g", "p"))

    @property
    def image(self) -> str:
        return "hf_pytorch_inference_gpu" if self.gpu else "hf_pytorch_inference_cpu"

    @property
    def vcpus(self) -> int:
        """From the size name (large 2, xlarge 4, Nxlarge 4N): only scales the CPU alarm threshold."""
        size = self.instance_type.split(".")[2]
        if size == "large":
            return 2
        match = re.fullmatch(r"(\d*)xlarge", size)
        return 4 * int(match.group(1) or 1) if match else 1

    def check(self, source: str, path: str) -> None:
        check_variant(self, source, path)


@dataclass(frozen=True)
class PruningConfig:
    """Super-network job -> tuning job (trials) -> Pareto selection -> export; plus the two endpoints."""

    enabled: bool = setting(False, hint="false: no Pruning stack in this environment")
    job_name_prefix: str | None = setting(
        None,
        pattern=r"[a-z][a-z0-9]*(-[a-z0-9]+)*",
        hint=f"lower-case, at most {MAX_PRUNING_PREFIX} characters; null: <app_name>-<env>",
    )
    search_space: Literal["uniform", "per_layer"] = setting("uniform", hint="training_code/nas/pruning/search_space.py")
    num_layers: int = setting(6, ge=1, le=48, hint="num_hidden_layers of the base model (MiniLM-L6: 6)")
    num_heads: int = setting(12, ge=1, le=64, hint="num_attention_heads of the base model")
    intermediate_size: int = setting(1536, ge=1, le=65536, hint="intermediate_size of the base model")
    supernet_hyperparameters: dict[str, str] = setting(dict(SUPERNET_HYPERPARAMETERS))
    supernet_instance_type: str = setting("ml.g5.xlarge", pattern=INSTANCE_TYPE)
    supernet_max_runtime_hours: int = setting(6, le=72, aws=aws.MAX_RUNTIME_HOURS)  # project: 3 days for one model
    trial_instance_type: str = setting(
        "ml.c5.xlarge", pattern=INSTANCE_TYPE, hint="latency is measured here: use the serving instance family"
    )
    # Project: 5 minutes to a day per trial (a trial evaluates one sub-network; the tuning job runs hundreds).
    trial_max_runtime_minutes: int = setting(60, ge=5, le=1440, aws=aws.TRIAL_MAX_RUNTIME_MINUTES)
    trial_hyperparameters: dict[str, str] = setting(
        {}, hint="evaluate_subnetwork.py flags every trial gets, e.g. latency-repeats"
    )
    max_jobs: int = setting(100, hint="trials of the tuning job", aws=aws.TUNING_MAX_JOBS)
    max_parallel_jobs: int = setting(10, aws=aws.TUNING_MAX_PARALLEL_JOBS)
    objectives: Literal[
        "validation_error,num_parameters",
        "validation_error,latency_ms",
        "validation_error,macs",
        "validation_error,num_parameters,macs",
    ] = setting(
        "validation_error,num_parameters",
        hint="the Pareto set's objectives; macs: multiply-accumulates at the validation split's mean length",
    )
    max_error_increase: float = setting(0.01, ge=0, le=1, hint="export: budget above the unpruned error")
    minimise: Literal["num_parameters", "latency_ms", "macs"] = setting(
        "num_parameters", hint="export: within the budget"
    )
    quantize: Literal["none", "dynamic_int8"] = setting(
        "none", hint="export: dynamic_int8 serves the pruned model's Linear layers in int8 (handler, at load)"
    )
    helper_instance_type: str = setting("ml.m5.large", pattern=INSTANCE_TYPE, hint="selection and export jobs")
    # Project: 5 GB to 1 TB for an encoder, its data and checkpoints.
    volume_size_gb: int = setting(30, ge=5, le=1024, aws=aws.TRAINING_VOLUME_SIZE)
    image_uri: str | None = setting(
        None, pattern=ECR_IMAGE_PATTERN, hint="an ECR image URI; null: the pinned table", aws=aws.TRAINING_IMAGE
    )
    log_retention_days: int = setting(30, aws=aws.LOG_RETENTION)  # check_log_retention: the list
    base_endpoint: EncoderEndpointConfig | None = setting(None, hint="null: no endpoint for the unpruned model")
    pruned_endpoint: EncoderEndpointConfig | None = setting(None, hint="null: no endpoint for the pruned model")

    def check(self, source: str, path: str) -> None:
        def fail(name: str, problem: str) -> None:
            raise ConfigError(source, f"{path}.{name}" if path else name, problem)

        for name in ("supernet_instance_type", "trial_instance_type", "helper_instance_type"):  # training jobs
            check_instance_type(getattr(self, name), TRAINING, source, f"{path}.{name}" if path else name)
        check_log_retention(
            self.log_retention_days, source, f"{path}.log_retention_days" if path else "log_retention_days"
        )
        if self.max_parallel_jobs > self.max_jobs:
            fail("max_parallel_jobs", f"got {self.max_parallel_jobs}; must be <= max_jobs ({self.max_jobs})")
        if self.job_name_prefix is not None and len(self.job_name_prefix) > MAX_PRUNING_PREFIX:
            fail(
                "job_name_prefix",
                f"got {self.job_name_prefix!r}; at most {MAX_PRUNING_PREFIX} characters "
                f"(tuning job names are limited to {_TUNING_NAME_MAX}){aws.TUNING_JOB_NAME.note()}",
            )
        if self.search_space == "per_layer" and 1 + 2 * self.num_layers > MAX_TUNED_PARAMETERS:
            fail(
                "num_layers",
                f"got {self.num_layers}; the per_layer space tunes 1 + 2 x num_layers parameters and "
                f"a tuning job allows {MAX_TUNED_PARAMETERS}: use the uniform space or at most 14 layers",
            )
        from ..code_contract.nas import SUPERNET_PROGRAM

        for name in self.supernet_hyperparameters:
            if not HYPERPARAMETER_NAME.fullmatch(name):
                fail(
                    f"supernet_hyperparameters.{name}",
                    "expected a train_supernetwork.py flag name (lower-case, dashes), e.g. learning-rate",
                )
            _check_known_flag(fail, f"supernet_hyperparameters.{name}", SUPERNET_PROGRAM, name)
        reserved = {"output-dir", "checkpoint-dir", "data-dir", "search-space"}
        clash = sorted(reserved & set(self.supernet_hyperparameters))
        if clash:
            fail(f"supernet_hyperparameters.{clash[0]}", "is set by the stack (paths from SageMaker, search_space)")
        self._check_trial_hyperparameters(fail)
        model = self.supernet_hyperparameters.get("model-name-or-path")
        if model in KNOWN_MODEL_CONFIGS:
            from ..code_contract.nas import model_dims_problem

            problem = model_dims_problem(
                self.num_layers, self.num_heads, self.intermediate_size, KNOWN_MODEL_CONFIGS[model]
            )
            if problem:
                fail(problem.split(" ", 1)[0], f"{problem} ({model}): type the model's dimensions")
        if self.minimise == "latency_ms" and "latency_ms" not in self.objectives:
            fail("minimise", "latency_ms needs objectives: validation_error,latency_ms")
        if self.minimise == "macs" and "macs" not in self.objectives.split(","):
            fail("minimise", "macs needs objectives: validation_error,macs (or validation_error,num_parameters,macs)")

    def _check_trial_hyperparameters(self, fail) -> None:
        """Trial flags: the split comes from nas_supernet.json, the tuned values and paths from the tuning job."""
        from ..code_contract.nas import TRIAL_PROGRAM, parameter_ranges

        ranges = parameter_ranges(self.search_space, self.num_layers, self.num_heads, self.intermediate_size)
        tuned = {r["Name"] for kind in ranges.values() for r in kind}
        reserved = {
            "search-space",
            "dataset",
            "split-seed",
            "validation-fraction",
            "data-dir",
            "model-dir",
            "output-data-dir",
        } | tuned
        for name in sorted(self.trial_hyperparameters):
            if name in reserved:
                fail(
                    f"trial_hyperparameters.{name}",
                    "is set per trial by the stack or the tuning job (the split "
                    "comes from nas_supernet.json, the sub-network from the ranges): remove it",
                )
            if not HYPERPARAMETER_NAME.fullmatch(name):
                fail(
                    f"trial_hyperparameters.{name}",
                    "expected an evaluate_subnetwork.py flag name (lower-case, dashes), e.g. latency-repeats",
                )
            _check_known_flag(fail, f"trial_hyperparameters.{name}", TRIAL_PROGRAM, name)


def _check_known_flag(fail, field: str, program: str, name: str) -> None:
    """A hyperparameter becomes `--name value` on the script's command line: a name its parser lacks would end
    the job with a usage error."""
    from ..code_contract.nas import script_flags

    flags = script_flags(program)
    if name not in flags:
        fail(field, f"unknown flag; {program} accepts: {', '.join(flags)}")
