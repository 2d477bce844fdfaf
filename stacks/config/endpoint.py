"""Settings every SageMaker real-time endpoint shares (rollout, scaling, alarms, data capture).

Model-agnostic on purpose: the LLM serving section and the encoder endpoints use them, each with its own
container.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, Protocol

from . import aws_limits as aws
from .errors import ConfigError
from .instance_types import ENDPOINT, check_instance_type
from .schema import setting


@dataclass(frozen=True)
class RolloutConfig:
    """How an endpoint update shifts traffic: rolling batches or blue/green, with auto-rollback on alarms."""

    strategy: Literal["rolling", "blue_green"] = setting("rolling")
    # Percentages (CAPACITY_PERCENT), at most all of the fleet: AWS documents 5% to 50% of the variant's instance
    # count, and 50% of the one instance dev, staging and local run (they ship 100) is no whole batch.
    maximum_batch_percent: int = setting(
        50, le=100, hint="rolling: share of capacity replaced per batch", aws=aws.ROLLING_BATCH
    )
    # Project: at least the 5% a forward batch may be, so a rollback is never slower than the rollout.
    rollback_maximum_batch_percent: int = setting(100, ge=5, le=100, aws=aws.ROLLBACK_BATCH)
    wait_interval_seconds: int = setting(300, hint="bake time per batch / before traffic shift", aws=aws.WAIT_INTERVAL)
    maximum_execution_timeout_seconds: int = setting(
        7200, hint="whole rolling update; must cover startup plus baking", aws=aws.EXECUTION_TIMEOUT
    )
    traffic: Literal["all_at_once", "canary"] = setting("all_at_once", hint="blue/green traffic shifting")
    canary_percent: int = setting(10, aws=aws.CANARY_SIZE)
    termination_wait_seconds: int = setting(
        600, hint="blue/green: keep the old fleet this long", aws=aws.TERMINATION_WAIT
    )


@dataclass(frozen=True)
class AutoscalingConfig:
    """Target tracking on SageMakerVariantInvocationsPerInstance (invocations per instance per minute)."""

    # Application Auto Scaling's model bounds none of these (a SageMaker variant may register min 0, documented).
    # Project: at least one instance, as target tracking on invocations per instance never scales out of zero
    # (no instance, no metric); at most 100, a guard against a typo's bill (raise it with the account's quota).
    min_capacity: int = setting(1, ge=1, le=100, aws=aws.SCALING_MIN_CAPACITY)
    max_capacity: int = setting(2, ge=1, le=100, aws=aws.SCALING_MAX_CAPACITY)
    # Project: an LLM on inf2 serves a handful of requests per minute; 100000 per instance per minute is no target.
    target_invocations_per_instance: float = setting(20.0, ge=1, le=100000, aws=aws.SCALING_TARGET_VALUE)
    # Project: at most a day between scaling steps.
    scale_in_cooldown_seconds: int = setting(900, ge=0, le=86400, aws=aws.SCALE_IN_COOLDOWN)
    scale_out_cooldown_seconds: int = setting(300, ge=0, le=86400, aws=aws.SCALE_OUT_COOLDOWN)

    def check(self, source: str, path: str) -> None:
        if self.max_capacity < self.min_capacity:
            raise ConfigError(
                source,
                f"{path}.max_capacity",
                f"got {self.max_capacity}; must be >= min_capacity ({self.min_capacity})",
            )


@dataclass(frozen=True)
class AlarmConfig:
    """Thresholds of the endpoint alarms; every alarm notifies the stack's SNS topic."""

    email: str | None = setting(None, pattern=r"[^@\s]+@[^@\s]+\.[a-z]{2,}", hint="subscribed to the alarm topic")
    # Thresholds (CloudWatch's Threshold is any double). Project ranges: a latency of 10 ms to 10 minutes, at least
    # one 5XX error, shares of at most 100%.
    model_latency_p90_ms: int = setting(
        20000, ge=10, le=600000, hint="ModelLatency p90, milliseconds", aws=aws.ALARM_THRESHOLD
    )
    invocation_5xx_errors: int = setting(
        1, ge=1, le=100000, hint="Invocation5XXErrors sum per period", aws=aws.ALARM_THRESHOLD
    )
    invocation_4xx_rate_percent: float = setting(
        10.0, ge=0.1, le=100, hint="4XX errors / invocations", aws=aws.ALARM_THRESHOLD
    )
    cpu_percent: float = setting(90.0, ge=1, le=100, hint="of all vCPUs of an instance", aws=aws.ALARM_THRESHOLD)
    memory_percent: float = setting(90.0, ge=1, le=100, aws=aws.ALARM_THRESHOLD)
    # Two of the periods CloudWatch documents (aws_limits.ALARM_PERIOD): SageMaker's endpoint metrics are per
    # minute, so a 10-30 s (high-resolution) alarm would lapse into INSUFFICIENT_DATA.
    period_seconds: Literal[60, 300] = setting(60, aws=aws.ALARM_PERIOD)
    # Project: at most 60 periods (5 hours at 300 s, inside CloudWatch's one-day evaluation window), and so at most
    # 60 breaching datapoints (check: no more than evaluation_periods).
    evaluation_periods: int = setting(5, le=60, aws=aws.ALARM_EVALUATION_PERIODS)
    datapoints_to_alarm: int = setting(3, le=60, aws=aws.ALARM_DATAPOINTS)

    def check(self, source: str, path: str) -> None:
        if self.datapoints_to_alarm > self.evaluation_periods:
            raise ConfigError(
                source,
                f"{path}.datapoints_to_alarm",
                f"got {self.datapoints_to_alarm}; must be <= evaluation_periods ({self.evaluation_periods})",
            )


class EndpointSection(Protocol):
    """The fields every endpoint section (serving, pruning's base/pruned endpoints) has."""

    initial_instance_count: int
    container_startup_health_check_timeout_seconds: int
    autoscaling: AutoscalingConfig
    rollout: RolloutConfig


def check_variant(section: EndpointSection, source: str, path: str) -> None:
    """Rules every endpoint section shares: a rolling update outlasts start-up plus baking, and the initial
    instance count lies inside the autoscaling range."""
    check_instance_type(section.instance_type, ENDPOINT, source, f"{path}.instance_type")
    rollout, autoscaling = section.rollout, section.autoscaling
    initial_instance_count = section.initial_instance_count
    needs = section.container_startup_health_check_timeout_seconds + rollout.wait_interval_seconds
    if rollout.strategy == "rolling" and rollout.maximum_execution_timeout_seconds < needs:
        raise ConfigError(
            source,
            f"{path}.rollout.maximum_execution_timeout_seconds",
            f"got {rollout.maximum_execution_timeout_seconds}; must be >= startup timeout + wait interval ({needs})",
        )
    if not autoscaling.min_capacity <= initial_instance_count <= autoscaling.max_capacity:
        raise ConfigError(
            source,
            f"{path}.initial_instance_count",
            f"got {initial_instance_count}; must be within autoscaling min_capacity..max_capacity "
            f"({autoscaling.min_capacity}..{autoscaling.max_capacity})",
        )


@dataclass(frozen=True)
class DataCaptureConfig:
    """Request/response capture into the artifact bucket (KMS-encrypted with the data key)."""

    enabled: bool = setting(False)
    # Project: at least 1%; 0 captures nothing (enabled: false says so).
    sampling_percent: int = setting(10, ge=1, aws=aws.CAPTURE_SAMPLING)
    prefix: str = setting("data-capture/", pattern=r"([A-Za-z0-9._-]+/)+", hint="S3 prefix ending in '/'")
