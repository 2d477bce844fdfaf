"""vLLM Neuron's request and answer: an OpenAI chat body to /invocations, OpenAI's choices or error body back."""

from __future__ import annotations

from typing import Any

from ..contract import InvokeError, json_body

SAMPLE_MESSAGES = [
    {"role": "system", "content": "As a data scientist"},
    {"role": "user", "content": "What is a machine learning?"},
]
# optimum-neuron's vLLM runner passes no per-request generators or logits processors: on Neuron these fields of an
# OpenAI request are ignored (logprobs come back empty), though the local vLLM (and the API) accept them.
NEURON_IGNORED = ("seed", "min_p", "logit_bias", "min_tokens", "logprobs", "top_logprobs")


def build_chat_request(args: Any) -> dict[str, Any]:
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


def request_warnings(payload: dict[str, Any]) -> list[str]:
    """tools/invoke.py's warning for a request that uses fields the Neuron runner ignores."""
    ignored = neuron_ignored(payload)
    if not ignored:
        return []
    return [
        f"{', '.join(ignored)}: ignored by the vLLM Neuron runner on inf2 (optimum-neuron passes no "
        "per-request generators or logits processors); a local vLLM honours them"
    ]


def parse_chat_response(body: bytes | str, status: int = 200) -> list[str]:
    """The texts of an OpenAI chat (or completion) answer, or InvokeError for OpenAI's error body and junk."""
    data, text = json_body(body, status)
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
