"""Send one LMI request to the serving endpoint (or a local LMI-compatible server) and print the answer.

    python tools/invoke.py --env dev                      # endpoint named in llm-inf2-dev-Serving's outputs
    python tools/invoke.py --stack llm-inf2-prod-Serving  # the same, by stack name
    python tools/invoke.py --endpoint-name NAME           # a SageMaker endpoint by name
    python tools/invoke.py --url http://127.0.0.1:8080    # tools/local_endpoint.py (POST /invocations)

The request is LMI's {"inputs": ..., "parameters": {...}}; `generated_text` goes to stdout, the latency
to stderr. A request the model server refuses ({"error": ..., "code": 424}) exits 1 with its message.
The default prompt is the Llama-2 chat sample from the seed notebook.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
SAMPLE_PROMPT = "<s>[INST] <<SYS>>\nAs a data scientist\n<</SYS>>\nWhat is a machine learning? [/INST]"
CONTENT_TYPE = "application/json"


class InvokeError(Exception):
    """The endpoint answered, but not with generated text; the message says why in one line."""


def build_request(args: argparse.Namespace) -> dict[str, Any]:
    parameters: dict[str, Any] = {"max_new_tokens": args.max_new_tokens, "do_sample": args.do_sample}
    for name in ("temperature", "top_p", "top_k", "repetition_penalty", "seed"):
        value = getattr(args, name)
        if value is not None:
            parameters[name] = value
    if args.stop:
        parameters["stop"] = list(args.stop)
    if args.details:
        parameters["details"] = True
    return {"inputs": args.prompt, "parameters": parameters}


def parse_response(body: bytes | str, status: int = 200) -> list[str]:
    """The generated texts of an LMI answer, or InvokeError for the {"error", "code"} form and junk."""
    text = body.decode("utf-8", errors="replace") if isinstance(body, bytes) else body
    try:
        data = json.loads(text)
    except json.JSONDecodeError:
        raise InvokeError(f"HTTP {status}: not JSON: {text[:200]!r}") from None
    items = data if isinstance(data, list) else [data]
    if any(isinstance(i, dict) and "error" in i for i in items) or status >= 400:
        error = next((i for i in items if isinstance(i, dict) and "error" in i), {})
        code = error.get("code", status)
        raise InvokeError(
            f"the model server rejected the request (LMI code {code}): {error.get('error', text[:200])}"
            + (" (check the prompt length against option.n_positions and the parameters)" if code == 424 else "")
        )
    if not all(isinstance(i, dict) and isinstance(i.get("generated_text"), str) for i in items):
        raise InvokeError(f"HTTP {status}: no generated_text in {text[:200]!r}")
    return [i["generated_text"] for i in items]


def invoke_url(url: str, payload: dict[str, Any], timeout_s: float) -> list[str]:
    target = url if url.rstrip("/").endswith(("/invocations", "/predictions")) else url.rstrip("/") + "/invocations"
    request = urllib.request.Request(  # noqa: S310 - the user names the URL
        target, data=json.dumps(payload).encode(), headers={"Content-Type": CONTENT_TYPE}, method="POST"
    )
    try:
        with urllib.request.urlopen(request, timeout=timeout_s) as response:  # noqa: S310
            return parse_response(response.read(), response.status)
    except urllib.error.HTTPError as error:
        return parse_response(error.read(), error.code)
    except urllib.error.URLError as error:
        raise InvokeError(f"cannot reach {target}: {error.reason}") from None


def invoke_sagemaker(client: Any, endpoint_name: str, payload: dict[str, Any]) -> list[str]:
    from botocore.exceptions import ClientError

    try:
        response = client.invoke_endpoint(
            EndpointName=endpoint_name, ContentType=CONTENT_TYPE, Accept=CONTENT_TYPE, Body=json.dumps(payload)
        )
    except ClientError as error:
        info = error.response.get("Error", {})
        if info.get("Code") == "ModelError":  # the container's own answer, e.g. LMI's 424
            status = error.response.get("OriginalStatusCode", 424)
            return parse_response(error.response.get("OriginalMessage", info.get("Message", "")), status)
        raise InvokeError(f"{endpoint_name}: {info.get('Code')}: {info.get('Message')}") from None
    return parse_response(response["Body"].read())


def endpoint_from_stack(cloudformation: Any, stack_name: str) -> str:
    """The EndpointName output of the serving stack."""
    stacks = cloudformation.describe_stacks(StackName=stack_name)["Stacks"]
    outputs = {o["OutputKey"]: o["OutputValue"] for o in stacks[0].get("Outputs", [])}
    if "EndpointName" not in outputs:
        raise InvokeError(f"stack {stack_name} has no EndpointName output (outputs: {', '.join(sorted(outputs))})")
    return outputs["EndpointName"]


def stack_for_env(env_name: str) -> str:
    sys.path.insert(0, str(ROOT))
    from stacks.config import load_config

    return load_config(env_name, ROOT / "config").stack_id("Serving")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    target = parser.add_mutually_exclusive_group()
    target.add_argument("--url", help="a local LMI-compatible server, e.g. http://127.0.0.1:8080")
    target.add_argument("--endpoint-name", help="a SageMaker endpoint")
    target.add_argument("--stack", help="read EndpointName from this CloudFormation stack's outputs")
    target.add_argument("--env", default="dev", help="the stack of config/ENV.yaml (default dev)")
    parser.add_argument("--region", help="AWS region (default: the SDK's)")
    parser.add_argument("--prompt", default=SAMPLE_PROMPT)
    parser.add_argument("--max-new-tokens", type=int, default=300)
    parser.add_argument("--do-sample", action=argparse.BooleanOptionalAction, default=True)
    parser.add_argument("--temperature", type=float)
    parser.add_argument("--top-p", type=float)
    parser.add_argument("--top-k", type=int)
    parser.add_argument("--repetition-penalty", type=float)
    parser.add_argument("--seed", type=int)
    parser.add_argument("--stop", action="append", help="stop sequence (repeatable); default </s>")
    parser.add_argument("--details", action="store_true", help="ask for token details")
    parser.add_argument("--timeout", type=float, default=120.0, help="seconds, --url only")
    args = parser.parse_args(argv)
    if args.stop is None:
        args.stop = ["</s>"]
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    payload = build_request(args)
    try:
        started = time.perf_counter()
        if args.url:
            where = args.url
            texts = invoke_url(args.url, payload, args.timeout)
        else:
            import boto3

            session = boto3.session.Session(region_name=args.region)
            endpoint = args.endpoint_name or endpoint_from_stack(
                session.client("cloudformation"), args.stack or stack_for_env(args.env)
            )
            where = f"endpoint {endpoint}"
            started = time.perf_counter()
            texts = invoke_sagemaker(session.client("sagemaker-runtime"), endpoint, payload)
        latency_ms = (time.perf_counter() - started) * 1000
    except InvokeError as error:
        print(f"invoke error: {error}", file=sys.stderr)
        return 1
    for text in texts:
        print(text)
    print(f"latency: {latency_ms:.0f} ms ({where})", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
