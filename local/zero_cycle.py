"""After the deploy: the served inference component scales to zero when idle and back on a request.

SageMaker's cycle ("Scale an endpoint to zero instances"): the idle alarm takes the copy count to 0, a request at 0
copies is refused (NoCapacityInvocationFailures) and that alarm's policy starts a copy, which serves once its
instance, image and model are up. The emulator's CopyCycle (local/emulator/inference_components.py) moves the copy
count on an emulated clock, so minutes of idle time and cold start pass at once; the request goes through the
retries `make invoke` sends it with (stacks/serving/backends/sagemaker_invoke.py). The local model server
(local/servers/llm_endpoint) is the copy: it starts when the count goes from 0 to 1 and answers the request. The
count is read with DescribeInferenceComponent, as a boto3 caller reads it on AWS.
"""

from __future__ import annotations

import json
import subprocess
import sys
import urllib.request
from collections.abc import Callable
from pathlib import Path

from botocore.exceptions import ClientError

from local import demo
from local.emulator import LocalAws
from local.emulator.inference_components import CopyCycle, components
from stacks.config.serving import ServingConfig
from stacks.serving.backends.sagemaker_invoke import invoke_sagemaker

# An emulated cold start from zero (instance, image pull, load of a compiled model: docs/serving.md's table
# puts it in minutes); the clock jumps, so it costs no real time.
COLD_START_S = 240.0
PROMPT = "<s>[INST] What is a machine learning? [/INST]"


class CopyServer:
    """The component's copy on this machine: local/servers/llm_endpoint on the served model, started on demand."""

    def __init__(self, model_dir: Path, properties: Path, work: Path) -> None:
        self.model_dir, self.properties, self.work = model_dir, properties, work
        self.process: subprocess.Popen | None = None
        self.url = ""

    def start(self) -> None:
        port_file = self.work / "server-copy.port"
        port_file.unlink(missing_ok=True)
        argv = [sys.executable, str(demo.SERVER), "--model-dir", str(self.model_dir)]
        argv += ["--properties", str(self.properties), "--port", "0", "--port-file", str(port_file)]
        log = (self.work / "server-copy.log").open("w")
        self.process = subprocess.Popen(argv, cwd=demo.ROOT, stdout=log, stderr=subprocess.STDOUT)
        self.url = demo._wait_ready(self.process, port_file, timeout=600)

    def answer(self, body: str | bytes) -> bytes:
        data = body.encode() if isinstance(body, str) else body
        request = urllib.request.Request(
            self.url + "/invocations", data=data, headers={"Content-Type": "application/json"}, method="POST"
        )
        with urllib.request.urlopen(request, timeout=300) as response:
            return response.read()

    def stop(self) -> None:
        if self.process is not None:
            self.process.terminate()
            self.process.wait(timeout=30)


def show_cycle(
    aws: LocalAws, serving: ServingConfig, endpoint: str, model_dir: Path, work: Path, say: Callable[[str], None]
) -> dict:
    """Idle to 0 copies, a refused request, the copy started by the no-capacity alarm and its answer; each step said,
    the copy count as DescribeInferenceComponent gives it after each. The copy serves `model_dir` with the
    serving.properties demo.ask_both wrote into `work`."""
    idle_minutes = serving.scale_to_zero.idle_minutes
    sagemaker = aws.client("sagemaker")
    (summary,) = sagemaker.list_inference_components(EndpointNameEquals=endpoint)["InferenceComponents"]
    name = summary["InferenceComponentName"]

    def copies() -> int:
        described = sagemaker.describe_inference_component(InferenceComponentName=name)
        return described["RuntimeConfig"]["CurrentCopyCount"]

    now = [0.0]
    server = CopyServer(model_dir, work / "serving.properties", work)
    cycle = CopyCycle(
        components(aws.account, aws.region)[name],
        serve=server.answer,
        idle_s=idle_minutes * 60,
        start_s=COLD_START_S,
        clock=lambda: now[0],
        on_copy=lambda: _start(server, say),
    )
    say(f"scale to zero: component {name} on {endpoint} {summary['InferenceComponentStatus']}, copies {copies()}")
    now[0] += idle_minutes * 60
    cycle.tick()
    say(f"scale to zero: {idle_minutes} min (emulated) without a request: copies {copies()}")
    payload = {"inputs": PROMPT, "parameters": {"max_new_tokens": 40, "do_sample": False}}
    try:
        texts = _request_from_zero(cycle, endpoint, name, payload, now, say)
    finally:
        server.stop()
    say(f"scale to zero: the copy answered: {texts[0][:80]!r}; copies {copies()}")
    for line in cycle.component.log:
        say(f"  {line}")
    return {"component": name, "log": list(cycle.component.log), "answer": texts[0], "copies": copies()}


def _request_from_zero(cycle: CopyCycle, endpoint: str, name: str, payload: dict, now: list[float], say) -> list[str]:
    """The first request at 0 copies is refused as SageMaker refuses it; `make invoke`'s retries wait (on the
    emulated clock) until the copy the no-capacity alarm started serves."""
    try:
        cycle.invoke_endpoint(
            EndpointName=endpoint, Body=json.dumps(payload), ContentType="application/json", InferenceComponentName=name
        )
    except ClientError as refused:
        say(
            f"scale to zero: a request at 0 copies: {refused.response['Error']['Code']}: "
            f"{refused.response['Error']['Message']}"
        )

    def wait(seconds: float) -> None:
        now[0] += seconds

    return invoke_sagemaker(cycle, endpoint, payload, component=name, wait_s=900, sleep=wait, say=say)


def _start(server: CopyServer, say: Callable[[str], None]) -> None:
    say("scale to zero: copies 0 -> 1: starting local/servers/llm_endpoint as the copy")
    server.start()
    say(f"scale to zero: the copy answers /ping at {server.url}")
