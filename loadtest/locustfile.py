"""Locust users for the encoder endpoints, and a stepped load shape (run it through loadtest/run.py).

- ``SageMakerUser``: ``invoke_endpoint`` through boto3 (retries off, so every call is one Locust request);
  LOADTEST_ENDPOINT names the endpoint, the AWS profile/region come from the environment as usual.
- ``LocalHttpUser``: POST /invocations to a local server (local/servers/encoder_endpoint.py); the host must be
  loopback (127.0.0.1, localhost, ::1).

Each request carries LOADTEST_PAIRS (default 1) sentence pairs drawn from LOADTEST_DATA (default the NAS
sample test set), the payload the handler expects. Each user sends at most LOADTEST_USER_RPS requests per
second (default 1; Locust's constant_throughput), so the user count is the offered load.

``StepShape`` holds LOADTEST_STEP_USERS, 2x, 3x ... users for LOADTEST_STEP_SECONDS each, up to
LOADTEST_MAX_USERS, then stops: bounded by construction (at most MAX_USERS_LIMIT users, MAX_RUN_SECONDS).
With LOADTEST_STOP_P95_MS it also stops after the first step whose current p95 is above that (far past the knee).
"""

from __future__ import annotations

import json
import os
import random
import time
from pathlib import Path
from urllib.parse import urlparse

from locust import HttpUser, LoadTestShape, User, constant_throughput, task

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_DATA = ROOT / "training_code" / "nas" / "sample_data" / "test.jsonl"
LOOPBACK = {"127.0.0.1", "localhost", "::1"}
MAX_USERS_LIMIT = 512
MAX_RUN_SECONDS = 3600


def _int(name: str, default: int) -> int:
    return int(os.environ.get(name, default))


def load_pairs(path: str | Path | None = None) -> list[list[str]]:
    """[sentence1, sentence2] of every row of a jsonl file with sentence1/sentence2 (or premise/hypothesis)."""
    pairs = []
    for line in Path(path or os.environ.get("LOADTEST_DATA") or DEFAULT_DATA).read_text().splitlines():
        if line.strip():
            row = json.loads(line)
            pairs.append([row.get("sentence1", row.get("premise")), row.get("sentence2", row.get("hypothesis"))])
    if not pairs:
        raise ValueError("no sentence pairs in the load-test data")
    return pairs


def check_loopback(url: str) -> str:
    host = urlparse(url).hostname
    if host not in LOOPBACK:
        raise ValueError(f"local load tests only target loopback (127.0.0.1), got {url!r}")
    return url


PAIRS = load_pairs()


def payload(rng: random.Random) -> bytes:
    return json.dumps({"inputs": rng.sample(PAIRS, min(_int("LOADTEST_PAIRS", 1), len(PAIRS)))}).encode()


class LocalHttpUser(HttpUser):
    wait_time = constant_throughput(float(os.environ.get("LOADTEST_USER_RPS", 1)))

    def on_start(self) -> None:
        check_loopback(self.host)
        self.rng = random.Random()

    @task
    def invoke(self) -> None:
        with self.client.post(
            "/invocations",
            data=payload(self.rng),
            headers={"Content-Type": "application/json"},
            name="invocations",
            catch_response=True,
        ) as response:
            if response.status_code != 200:
                response.failure(f"HTTP {response.status_code}: {response.text[:200]}")


class SageMakerUser(User):
    wait_time = constant_throughput(float(os.environ.get("LOADTEST_USER_RPS", 1)))

    def on_start(self) -> None:
        import boto3
        from botocore.config import Config

        self.endpoint = os.environ["LOADTEST_ENDPOINT"]
        self.rng = random.Random()
        self.runtime = boto3.client(
            "sagemaker-runtime", config=Config(retries={"total_max_attempts": 1, "mode": "standard"})
        )

    @task
    def invoke(self) -> None:
        body = payload(self.rng)
        start = time.perf_counter()
        length, exception = 0, None
        try:
            response = self.runtime.invoke_endpoint(
                EndpointName=self.endpoint, ContentType="application/json", Accept="application/json", Body=body
            )
            length = len(response["Body"].read())
        except Exception as error:  # noqa: BLE001 - every failure is reported to Locust, none is retried
            exception = error
        self.environment.events.request.fire(
            request_type="sagemaker",
            name="invocations",
            response_time=(time.perf_counter() - start) * 1000,
            response_length=length,
            exception=exception,
            context={"endpoint": self.endpoint},
        )


class StepShape(LoadTestShape):
    """STEP_USERS, 2*STEP_USERS, ... users, STEP_SECONDS each, up to MAX_USERS; then the run ends."""

    def __init__(self) -> None:
        super().__init__()
        self.step_users = max(1, _int("LOADTEST_STEP_USERS", 1))
        self.step_seconds = max(1, _int("LOADTEST_STEP_SECONDS", 10))
        self.max_users = min(_int("LOADTEST_MAX_USERS", 10), MAX_USERS_LIMIT)
        self.stop_p95_ms = float(os.environ.get("LOADTEST_STOP_P95_MS") or 0)
        self.step = 0
        steps = -(-self.max_users // self.step_users)
        if steps * self.step_seconds > MAX_RUN_SECONDS:
            raise ValueError(f"{steps} steps of {self.step_seconds} s exceed {MAX_RUN_SECONDS} s")

    def tick(self):
        step = int(self.get_run_time() // self.step_seconds) + 1
        if step != self.step:
            if self.step and self.stop_p95_ms and self._current_p95() > self.stop_p95_ms:
                return None
            self.step = step
        users = step * self.step_users
        if users > self.max_users:
            return None
        return users, users  # spawn the whole step at once

    def _current_p95(self) -> float:
        if self.runner is None:
            return 0.0
        return float(self.runner.stats.total.get_current_response_time_percentile(0.95) or 0)
