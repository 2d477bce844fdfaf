"""Send one request to the serving endpoint (or a local server) in its container's contract and print the answer.

    python tools/invoke.py --env dev                      # endpoint named in llm-inf2-dev-Serving's outputs
    python tools/invoke.py --stack llm-inf2-prod-Serving  # the same, by stack name
    python tools/invoke.py --endpoint-name NAME           # a SageMaker endpoint by name
    python tools/invoke.py --url http://127.0.0.1:8080    # local/servers/llm_endpoint.py (POST /invocations)
    python tools/invoke.py --backend vllm_neuronx ...     # the vLLM Neuron container's OpenAI chat contract

--backend lmi_neuronx (the default; with --env, the config's serving.backend) sends LMI's
{"inputs": ..., "parameters": {...}}, the Llama-2 chat sample prompt by default; a refusal
({"error": ..., "code": 424}) exits 1 with its message. --backend vllm_neuronx sends an OpenAI chat body
({"messages": [...], "max_tokens": ...}) to /invocations, which the container tries as a chat request first;
the chat template comes from the model's tokenizer, so the default is the same sample as plain messages, and a
refusal ({"error": {"message", "type", "code"}}, HTTP 400/404) exits 1. The text goes to stdout, the latency
to stderr. A vllm_neuronx request that uses a field the Neuron runner ignores (NEURON_IGNORED) gets a warning.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
SAMPLE_PROMPT = "<s>[INST] <<SYS>>\nAs a data scientist\n<</SYS>>\nWhat is a machine learning? [/INST]"
SAMPLE_MESSAGES = [
    {"role": "system", "content": "As a data scientist"},
    {"role": "user", "content": "What is a machine learning?"},
]
CONTENT_TYPE = "application/json"
BACKENDS = ("lmi_neuronx", "vllm_neuronx")
# optimum-neuron's vLLM runner passes no per-request generators or logits processors: on Neuron these fields of an
# OpenAI request are ignored (logprobs come back empty), though the local vLLM (and the API) accept them.
NEURON_IGNORED = ("seed", "min_p", "logit_bias", "min_tokens", "logprobs", "top_logprobs")


class InvokeError(Exception):
    """The endpoint answered, but not with generated text; the message says why in one line."""


def build_request(args: argparse.Namespace) -> dict[str, Any]:
    """LMI's body; the stop sequence defaults to Llama 2's </s>."""
    parameters: dict[str, Any] = {"max_new_tokens": args.max_new_tokens, "do_sample": args.do_sample}
    for name in ("temperature", "top_p", "top_k", "repetition_penalty", "seed"):
        value = getattr(args, name)
        if value is not None:
            parameters[name] = value
    parameters["stop"] = list(args.stop) if args.stop else ["</s>"]
    if args.details:
        parameters["details"] = True
    return {"inputs": args.prompt or SAMPLE_PROMPT, "parameters": parameters}


def build_chat_request(args: argparse.Namespace) -> dict[str, Any]:
    """An OpenAI chat body for vLLM; --no-do-sample is temperature 0 (greedy), as vLLM reads it."""
    messages = [{"role": "user", "content": args.prompt}] if args.prompt else SAMPLE_MESSAGES
    body: dict[str, Any] = {"messages": messages, "max_tokens": args.max_new_tokens}
    if args.model:
        body["model"] = args.model
    body["temperature"] = args.temperature if args.do_sample else 0
    for name in ("top_p", "top_k", "repetition_penalty", "seed", "min_p", "min_tokens", "stop"):
        body[name] = getattr(args, name)
    return {k: v for k, v in body.items() if v is not None}  # unset: the server's defaults


def neuron_ignored(payload: dict[str, Any]) -> list[str]:
    """The fields of an OpenAI body that a vllm_neuronx endpoint on inf2 ignores."""
    return [name for name in NEURON_IGNORED if payload.get(name) is not None and payload.get(name) is not False]


def _json(body: bytes | str, status: int) -> tuple[Any, str]:
    text = body.decode("utf-8", errors="replace") if isinstance(body, bytes) else body
    try:
        return json.loads(text), text
    except json.JSONDecodeError:
        raise InvokeError(f"HTTP {status}: not JSON: {text[:200]!r}") from None


def parse_response(body: bytes | str, status: int = 200) -> list[str]:
    """The generated texts of an LMI answer, or InvokeError for the {"error", "code"} form and junk."""
    data, text = _json(body, status)
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


def parse_chat_response(body: bytes | str, status: int = 200) -> list[str]:
    """The texts of an OpenAI chat (or completion) answer, or InvokeError for OpenAI's error body and junk."""
    data, text = _json(body, status)
    if not isinstance(data, dict) or "error" in data or status >= 400:
        error = data.get("error") if isinstance(data, dict) else None
        error = error if isinstance(error, dict) else {"message": text[:200]}
        raise InvokeError(
            f"the model server rejected the request (HTTP {error.get('code', status)} {error.get('type', 'error')}): "
            f"{error.get('message')}" + _hint(status, str(error.get("message")))
        )
    choices = data.get("choices")
    if not isinstance(choices, list) or not choices or not all(isinstance(c, dict) for c in choices):
        raise InvokeError(f"HTTP {status}: no choices in {text[:200]!r}")
    texts = [(c.get("message") or {}).get("content") if "message" in c else c.get("text") for c in choices]
    if not all(isinstance(t, str) for t in texts):
        raise InvokeError(f"HTTP {status}: no message content in {text[:200]!r}")
    return texts


def _hint(status: int, message: str) -> str:
    if status == 404:
        return " (the endpoint serves another model name: drop --model or pass the served name)"
    if "context length" in message or "max_model_len" in message:
        return " (check the prompt + --max-new-tokens against the sequence length)"
    return ""


Parser = Callable[[bytes | str, int], list[str]]
PARSERS: dict[str, Parser] = {"lmi_neuronx": parse_response, "vllm_neuronx": parse_chat_response}
BUILDERS = {"lmi_neuronx": build_request, "vllm_neuronx": build_chat_request}


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


def invoke_sagemaker(
    client: Any, endpoint_name: str, payload: dict[str, Any], parse: Parser = parse_response
) -> list[str]:
    from botocore.exceptions import ClientError

    try:
        response = client.invoke_endpoint(
            EndpointName=endpoint_name, ContentType=CONTENT_TYPE, Accept=CONTENT_TYPE, Body=json.dumps(payload)
        )
    except ClientError as error:
        info = error.response.get("Error", {})
        if info.get("Code") == "ModelError":  # the container's own answer, e.g. LMI's 424 or vLLM's 400
            status = error.response.get("OriginalStatusCode", 424)
            return parse(error.response.get("OriginalMessage", info.get("Message", "")), status)
        raise InvokeError(f"{endpoint_name}: {info.get('Code')}: {info.get('Message')}") from None
    return parse(response["Body"].read())


def endpoint_from_stack(cloudformation: Any, stack_name: str) -> str:
    """The EndpointName output of the serving stack."""
    stacks = cloudformation.describe_stacks(StackName=stack_name)["Stacks"]
    outputs = {o["OutputKey"]: o["OutputValue"] for o in stacks[0].get("Outputs", [])}
    if "EndpointName" not in outputs:
        raise InvokeError(f"stack {stack_name} has no EndpointName output (outputs: {', '.join(sorted(outputs))})")
    return outputs["EndpointName"]


def _config(env_name: str) -> Any:
    sys.path.insert(0, str(ROOT))
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
        "--backend", choices=BACKENDS, help="the container's contract (default: --env's serving.backend, else LMI)"
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
    args = parser.parse_args(argv)
    if args.backend is None:
        uses_env = not (args.url or args.endpoint_name or args.stack)
        args.backend = backend_for_env(args.env) if uses_env else "lmi_neuronx"
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    payload, parse = BUILDERS[args.backend](args), PARSERS[args.backend]
    ignored = neuron_ignored(payload) if args.backend == "vllm_neuronx" else []
    if ignored:
        print(
            f"warning: {', '.join(ignored)}: ignored by the vLLM Neuron runner on inf2 (optimum-neuron passes no "
            "per-request generators or logits processors); a local vLLM honours them",
            file=sys.stderr,
        )
    try:
        started = time.perf_counter()
        if args.url:
            where = args.url
            texts = invoke_url(args.url, payload, args.timeout, parse)
        else:
            import boto3

            session = boto3.session.Session(region_name=args.region)
            endpoint = args.endpoint_name or endpoint_from_stack(
                session.client("cloudformation"), args.stack or stack_for_env(args.env)
            )
            where = f"endpoint {endpoint}"
            started = time.perf_counter()
            texts = invoke_sagemaker(session.client("sagemaker-runtime"), endpoint, payload, parse)
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
