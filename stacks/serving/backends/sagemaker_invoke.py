"""InvokeEndpoint as a SageMaker caller sends it: the component named, and retried while a scale-to-zero component
has no copy (`make invoke`, tools/invoke.py, and the local pipeline's scale-to-zero cycle, local/zero_cycle.py).

Here, below both, so the operator tool and the emulator's pipeline run the same retries. The client is any boto3
sagemaker-runtime client (or the emulator's stand-in); standard library otherwise.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable
from typing import Any

from .contract import InvokeError
from .lmi_neuronx.contract import parse_response

CONTENT_TYPE = "application/json"
Parser = Callable[[bytes | str, int], list[str]]


# While a scale-to-zero component has no copy, InvokeEndpoint refuses with a ValidationError saying so ("has no
# capacity to process this request"): the first copy takes minutes (docs/serving.md, Scale to zero).
NO_CAPACITY = "no capacity"
BACKOFF_S = (5, 10, 20, 40, 60)  # then every 60 s


def _no_capacity(error: Any) -> bool:
    info = error.response.get("Error", {})
    return info.get("Code") == "ValidationError" and NO_CAPACITY in str(info.get("Message", "")).lower()


def invoke_sagemaker(
    client: Any,
    endpoint_name: str,
    payload: dict[str, Any],
    parse: Parser = parse_response,
    *,
    component: str | None = None,
    wait_s: float = 0,
    sleep: Callable[[float], None] = time.sleep,
    say: Callable[[str], None] = lambda line: print(line, file=sys.stderr),
) -> list[str]:
    """One request; to a component endpoint it names the component, and while no copy runs (scaled to zero) it is
    retried with backoff for up to `wait_s` seconds, each wait said on stderr."""
    from botocore.exceptions import ClientError

    extra = {"InferenceComponentName": component} if component else {}
    waited = 0.0
    for attempt in range(10_000):
        try:
            response = client.invoke_endpoint(
                EndpointName=endpoint_name,
                ContentType=CONTENT_TYPE,
                Accept=CONTENT_TYPE,
                Body=json.dumps(payload),
                **extra,
            )
            break
        except ClientError as error:
            pause = BACKOFF_S[min(attempt, len(BACKOFF_S) - 1)]
            if not _no_capacity(error) or waited + pause > wait_s:
                return _refused(error, endpoint_name, parse, waited)
            say(
                f"{endpoint_name}: component {component} has no copy running (scaled to zero); SageMaker starts one "
                f"on this request (minutes: instance, image, model load): retrying in {pause} s ({waited:g} s waited)"
            )
            sleep(pause)
            waited += pause
    return parse(response["Body"].read())


def _refused(error: Any, endpoint_name: str, parse: Parser, waited: float) -> list[str]:
    info = error.response.get("Error", {})
    if info.get("Code") == "ModelError":  # the container's own answer, e.g. LMI's 424 or vLLM's 400
        status = error.response.get("OriginalStatusCode", 424)
        return parse(error.response.get("OriginalMessage", info.get("Message", "")), status)
    after = f" (after {waited:g} s of retries; raise --wait-for-copy)" if _no_capacity(error) else ""
    raise InvokeError(f"{endpoint_name}: {info.get('Code')}: {info.get('Message')}{after}") from None
