"""Send one request to the serving endpoint (or a local server) in its container's contract and print the answer.

    python tools/invoke.py --env dev                      # endpoint named in llm-inf2-dev-Serving's outputs
    python tools/invoke.py --stack llm-inf2-prod-Serving  # the same, by stack name
    python tools/invoke.py --endpoint-name NAME           # a SageMaker endpoint by name
    python tools/invoke.py --url http://127.0.0.1:8080    # local/servers/llm_endpoint (POST /invocations)
    python tools/invoke.py --backend vllm_neuronx ...     # the vLLM Neuron container's OpenAI chat contract

--backend lmi_neuronx (the default; with --env, the config's serving.backend) sends LMI's
{"inputs": ..., "parameters": {...}}, the Llama-2 chat sample prompt by default; a refusal
({"error": ..., "code": 424}) exits 1 with its message. --backend vllm_neuronx sends an OpenAI chat body
({"messages": [...], "max_tokens": ...}) to /invocations, which the container tries as a chat request first;
the chat template comes from the model's tokenizer, so the default is the same sample as plain messages, and a
refusal ({"error": {"message", "type", "code"}}, HTTP 400/404) exits 1. The text goes to stdout, the latency
to stderr. A vllm_neuronx request that uses a field the Neuron runner ignores (NEURON_IGNORED) gets a warning.
A scale-to-zero endpoint (serving.scale_to_zero) names its inference component in the stack's outputs; the request
names it too, and while no copy runs (SageMaker refuses with "no capacity") it is retried with backoff (5 s up
to 60 s apart, --wait-for-copy seconds in all), each wait said on stderr.
Each backend's request and answer live in stacks/serving/backends/<backend>/contract.py, found by --backend.
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
sys.path.insert(0, str(ROOT))  # `python tools/invoke.py`: the backends' contracts live in stacks/

from stacks.serving.backends import backend, names  # noqa: E402
from stacks.serving.backends.contract import InvokeError  # noqa: E402
from stacks.serving.backends.lmi_neuronx.contract import SAMPLE_PROMPT, build_request, parse_response  # noqa: E402
from stacks.serving.backends.sagemaker_invoke import CONTENT_TYPE, Parser, invoke_sagemaker  # noqa: E402
from stacks.serving.backends.vllm_neuronx.contract import (  # noqa: E402
    SAMPLE_MESSAGES,
    build_chat_request,
    neuron_ignored,
    parse_chat_response,
)

__all__ = ["SAMPLE_MESSAGES", "SAMPLE_PROMPT", "InvokeError", "build_chat_request", "build_request"]
__all__ += ["invoke_sagemaker", "neuron_ignored", "parse_chat_response", "parse_response"]


def invoke_url(url: str, payload: dict[str, Any], timeout_s: float, parse: Parser = parse_response) -> list[str]:
    routes = ("/invocations", "/predictions", "/v1/chat/completions")
    target = url if url.rstrip("/").endswith(routes) else url.rstrip("/") + "/invocations"
    request = urllib.request.Request(  # noqa: S310 - the user names the URL
        target, data=json.dumps(payload).encode(), headers={"Content-Type": CONTENT_TYPE}, method="POST"
    )
    try:
        with urllib.request.urlopen(request, timeout=timeout_s) as response:  # noqa: S310
            return parse(response.read(), response.status)
    except urllib.error.HTTPError as error:
        return parse(error.read(), error.code)
    except urllib.error.URLError as error:
        raise InvokeError(f"cannot reach {target}: {error.reason}") from None


def endpoint_from_stack(cloudformation: Any, stack_name: str) -> str:
    """The EndpointName output of the serving stack."""
    return target_from_stack(cloudformation, stack_name)[0]


def target_from_stack(cloudformation: Any, stack_name: str) -> tuple[str, str | None]:
    """(EndpointName, InferenceComponentName or None) from the serving stack's outputs: a scale-to-zero endpoint
    hosts the model as a component that each request names."""
    stacks = cloudformation.describe_stacks(StackName=stack_name)["Stacks"]
    outputs = {o["OutputKey"]: o["OutputValue"] for o in stacks[0].get("Outputs", [])}
    if "EndpointName" not in outputs:
        raise InvokeError(f"stack {stack_name} has no EndpointName output (outputs: {', '.join(sorted(outputs))})")
    return outputs["EndpointName"], outputs.get("InferenceComponentName")


def _config(env_name: str) -> Any:
    from stacks.config import load_config

    return load_config(env_name, ROOT / "config")


def stack_for_env(env_name: str) -> str:
    return _config(env_name).stack_id("Serving")


def backend_of(config: Any) -> str:
    """The serving container of a loaded config; configs from before serving.backend existed are LMI."""
    return getattr(config.serving, "backend", "lmi_neuronx")


def backend_for_env(env_name: str) -> str:
    return backend_of(_config(env_name))


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    target = parser.add_mutually_exclusive_group()
    target.add_argument("--url", help="a local LMI-compatible server, e.g. http://127.0.0.1:8080")
    target.add_argument("--endpoint-name", help="a SageMaker endpoint")
    target.add_argument("--stack", help="read EndpointName from this CloudFormation stack's outputs")
    target.add_argument("--env", default="dev", help="the stack of config/ENV.yaml (default dev)")
    parser.add_argument(
        "--backend", choices=names(), help="the container's contract (default: --env's serving.backend, else LMI)"
    )
    parser.add_argument("--model", help="vllm_neuronx: the served model name to send (default: none, any)")
    parser.add_argument("--region", help="AWS region (default: the SDK's)")
    parser.add_argument("--prompt", help="default: the seed notebook's sample (LMI: Llama-2 [INST] text)")
    parser.add_argument("--max-new-tokens", type=int, default=300)
    parser.add_argument("--do-sample", action=argparse.BooleanOptionalAction, default=True)
    parser.add_argument("--temperature", type=float)
    parser.add_argument("--top-p", type=float)
    parser.add_argument("--top-k", type=int)
    parser.add_argument("--repetition-penalty", type=float)
    parser.add_argument("--seed", type=int)
    parser.add_argument("--min-p", type=float, help="vllm_neuronx only (ignored on Neuron)")
    parser.add_argument("--min-tokens", type=int, help="vllm_neuronx only (ignored on Neuron)")
    parser.add_argument("--stop", action="append", help="stop sequence (repeatable); LMI's default </s>")
    parser.add_argument("--details", action="store_true", help="LMI: ask for token details")
    parser.add_argument("--timeout", type=float, default=120.0, help="seconds, --url only")
    parser.add_argument("--component", help="with --endpoint-name: its inference component (scale-to-zero endpoints)")
    parser.add_argument(
        "--wait-for-copy",
        type=float,
        default=900.0,
        help="seconds to retry, with backoff, while a scaled-to-zero component starts its first copy",
    )
    args = parser.parse_args(argv)
    if args.backend is None:
        uses_env = not (args.url or args.endpoint_name or args.stack)
        args.backend = backend_for_env(args.env) if uses_env else "lmi_neuronx"
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    contract = backend(args.backend)  # stacks/serving/backends/<backend>/contract.py
    payload, parse = contract.build_request(args), contract.parse_response
    for warning in contract.request_warnings(payload):
        print(f"warning: {warning}", file=sys.stderr)
    try:
        started = time.perf_counter()
        if args.url:
            where = args.url
            texts = invoke_url(args.url, payload, args.timeout, parse)
        else:
            import boto3

            session = boto3.session.Session(region_name=args.region)
            endpoint, component = args.endpoint_name, args.component
            if endpoint is None:
                endpoint, component = target_from_stack(
                    session.client("cloudformation"), args.stack or stack_for_env(args.env)
                )
            where = f"endpoint {endpoint}" + (f", component {component}" if component else "")
            started = time.perf_counter()
            texts = invoke_sagemaker(
                session.client("sagemaker-runtime"),
                endpoint,
                payload,
                parse,
                component=component,
                wait_s=args.wait_for_copy,
            )
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
