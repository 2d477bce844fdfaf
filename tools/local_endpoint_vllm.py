"""The Hugging Face vLLM Neuron container's request contract (vLLM 0.11's OpenAI server) for tools/local_endpoint.py.

Routes: GET/POST /ping, GET /health, GET /v1/models, POST /v1/chat/completions, /v1/completions and SageMaker's
/invocations (a chat request if the body has `messages`, else a completion if it has `prompt`).
Bodies are OpenAI's, with model, max_tokens (or max_completion_tokens), temperature, top_p, top_k,
repetition_penalty, stop, seed, stream and stream_options. As in vLLM: an absent temperature samples at 1.0,
temperature 0 is greedy; an absent max_tokens means "up to the sequence length"; `model`, when sent, must be the
served name (else 404); fields vLLM knows but this server cannot honour (n > 1, logprobs, tools...) get a 400
naming them; other unknown fields are ignored, as vLLM ignores them. `stream: true` answers server-sent events in
OpenAI's chunk format, ending with `data: [DONE]`. Errors are OpenAI's {"error": {"message", "type", "param",
"code"}}, `code` being the HTTP status.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from http import HTTPStatus
from queue import Queue
from typing import Any

from tools.local_endpoint import Engine, Job, Sampling

# Fields of OpenAI/vLLM requests the local server refuses rather than silently ignoring.
UNSUPPORTED = (
    "logprobs",
    "top_logprobs",
    "tools",
    "tool_choice",
    "functions",
    "response_format",
    "logit_bias",
    "min_p",
    "echo",
    "best_of",
    "suffix",
    "prompt_logprobs",
    "guided_json",
    "guided_regex",
)
FINISH_REASONS = {"eos_token": "stop", "stop_sequence": "stop", "length": "length"}


class OpenAIError(Exception):
    """A refused request, answered as OpenAI's error body with this HTTP status."""

    def __init__(self, message: str, status: int = HTTPStatus.BAD_REQUEST, error_type: str = "BadRequestError"):
        super().__init__(message)
        self.status, self.error_type = int(status), error_type

    def body(self) -> dict[str, Any]:
        return {"error": {"message": str(self), "type": self.error_type, "param": None, "code": self.status}}


@dataclass
class Request:
    """One parsed OpenAI request: the rendered prompt's job and what the response needs to echo."""

    kind: str  # "chat" or "completion"
    job: Job
    stream: bool
    include_usage: bool


def _get(payload: dict[str, Any], name: str, types: type | tuple[type, ...], default: Any = None) -> Any:
    value = payload.get(name)
    if value is None:
        return default
    ok = isinstance(value, types) and not (isinstance(value, bool) and bool not in _tuple(types))
    if not ok:
        raise OpenAIError(f"'{name}' has the wrong type: {json.dumps(value)}")
    return value


def _tuple(types: type | tuple[type, ...]) -> tuple[type, ...]:
    return types if isinstance(types, tuple) else (types,)


def _content(message: Any) -> dict[str, str]:
    """A message with string content; OpenAI's list of text parts is joined as vLLM does."""
    if not isinstance(message, dict) or not isinstance(message.get("role"), str):
        raise OpenAIError("each message must be an object with a 'role' and 'content'")
    content = message.get("content")
    if isinstance(content, list):
        if not all(isinstance(p, dict) and p.get("type") == "text" and isinstance(p.get("text"), str) for p in content):
            raise OpenAIError("only text content parts are supported")
        content = "\n".join(p["text"] for p in content)
    if not isinstance(content, str):
        raise OpenAIError("a message's 'content' must be a string or a list of text parts")
    return {"role": message["role"], "content": content}


def render_chat(payload: dict[str, Any], engine: Engine) -> str:
    """The prompt the model's own chat template makes of `messages`; 400 when the tokenizer has no template."""
    messages = payload.get("messages")
    if not isinstance(messages, list) or not messages:
        raise OpenAIError("'messages' must be a non-empty list")
    if not getattr(engine.tokenizer, "chat_template", None):
        raise OpenAIError(
            "As of transformers v4.44, default chat template is no longer allowed, so you must provide a chat "
            "template if the tokenizer does not define one."
        )
    return engine.apply_chat_template([_content(m) for m in messages])


def sampling_of(payload: dict[str, Any]) -> Sampling:
    temperature = float(_get(payload, "temperature", (int, float), 1.0))
    top_p = float(_get(payload, "top_p", (int, float), 1.0))
    top_k = int(_get(payload, "top_k", int, -1))
    penalty = float(_get(payload, "repetition_penalty", (int, float), 1.0))
    if temperature < 0 or not 0 < top_p <= 1 or top_k < -1 or penalty <= 0:
        raise OpenAIError("out of range: temperature >= 0, 0 < top_p <= 1, top_k >= -1, repetition_penalty > 0")
    if temperature == 0:  # vLLM: greedy
        return Sampling(repetition_penalty=penalty)
    seed = _get(payload, "seed", int)
    return Sampling(True, temperature, top_p, max(top_k, 0), penalty, seed)  # top_k -1 or 0: off


def parse(payload: Any, kind: str, served_name: str, engine: Engine) -> Request:
    """A Request for a chat or completion body, or OpenAIError (404 for another model's name, 400 otherwise)."""
    if not isinstance(payload, dict):
        raise OpenAIError("the body must be a JSON object")
    model = _get(payload, "model", str)
    if model is not None and model != served_name:
        raise OpenAIError(f"The model `{model}` does not exist.", HTTPStatus.NOT_FOUND, "NotFoundError")
    refused = [name for name in UNSUPPORTED if payload.get(name) not in (None, False)]
    if refused or _get(payload, "n", int, 1) != 1:
        raise OpenAIError(f"not supported by the local server: {', '.join(refused) or 'n > 1'}")
    prompt = render_chat(payload, engine) if kind == "chat" else _prompt(payload)
    stop = _stop(payload)
    ids = engine.encode(prompt)
    stream = _get(payload, "stream", bool, False)
    options = _get(payload, "stream_options", dict, {})
    job = Job(
        prompt=prompt,
        input_ids=ids,
        sampling=sampling_of(payload),
        max_new_tokens=_max_tokens(payload, len(ids), engine.n_positions),
        stop=stop,
        details=True,
        return_full_text=False,
        stream=Queue() if stream else None,
    )
    return Request(kind, job, stream, bool(stream and options.get("include_usage")))


def _prompt(payload: dict[str, Any]) -> str:
    prompt = payload.get("prompt")
    if not isinstance(prompt, str) or not prompt:
        raise OpenAIError("'prompt' must be a non-empty string (the local server takes one prompt per request)")
    return prompt


def _stop(payload: dict[str, Any]) -> list[str]:
    stop = _get(payload, "stop", (str, list), [])
    stop = [stop] if isinstance(stop, str) else stop
    if not all(isinstance(s, str) and s for s in stop):
        raise OpenAIError("'stop' must be a string or a list of non-empty strings")
    return stop


def _max_tokens(payload: dict[str, Any], prompt_tokens: int, sequence_length: int) -> int:
    """max_completion_tokens (the newer name) or max_tokens; absent: whatever the sequence length leaves."""
    requested = _get(payload, "max_completion_tokens", int)
    requested = requested if requested is not None else _get(payload, "max_tokens", int)
    if requested is not None and requested < 1:
        raise OpenAIError("'max_tokens' must be at least 1")
    if prompt_tokens + (requested or 1) > sequence_length:
        raise OpenAIError(
            f"This model's maximum context length is {sequence_length} tokens. However, you requested "
            f"{prompt_tokens + (requested or 1)} tokens ({prompt_tokens} in the messages, {requested or 1} in the "
            "completion). Please reduce the length of the messages or completion."
        )
    return requested or sequence_length - prompt_tokens


def invocations_kind(payload: Any) -> str:
    """SageMaker's /invocations: a chat request if it has `messages`, else a completion if it has `prompt`."""
    if isinstance(payload, dict) and "messages" in payload:
        return "chat"
    if isinstance(payload, dict) and "prompt" in payload:
        return "completion"
    raise OpenAIError(
        "Cannot find suitable handler for request. Expected one of: ChatCompletionRequest ('messages'), "
        "CompletionRequest ('prompt')"
    )


# ---------------------------------------------------------------------------------------------- responses


def _usage(job: Job, completion_tokens: int) -> dict[str, int]:
    prompt_tokens = len(job.input_ids)
    return {
        "prompt_tokens": prompt_tokens,
        "completion_tokens": completion_tokens,
        "total_tokens": prompt_tokens + completion_tokens,
    }


def response(request: Request, served_name: str, request_id: str, created: int) -> dict[str, Any]:
    """The chat.completion or text_completion object for a finished job."""
    result = request.job.result
    text, details = result["generated_text"], result["details"]
    finish = FINISH_REASONS[details["finish_reason"]]
    if request.kind == "chat":
        choice = {
            "index": 0,
            "message": {"role": "assistant", "content": text},
            "logprobs": None,
            "finish_reason": finish,
        }
    else:
        choice = {"index": 0, "text": text, "logprobs": None, "finish_reason": finish}
    return {
        "id": request_id,
        "object": "chat.completion" if request.kind == "chat" else "text_completion",
        "created": created,
        "model": served_name,
        "choices": [choice],
        "usage": _usage(request.job, details["generated_tokens"]),
    }


def chunk(
    request: Request, served_name: str, request_id: str, created: int, text: str | None, finish: str | None = None
) -> dict[str, Any]:
    """One streamed chunk: text=None is the chat's opening role chunk; finish closes the choice."""
    if request.kind == "chat":
        delta = {"role": "assistant", "content": ""} if text is None else ({"content": text} if text else {})
        choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}
    else:
        choice = {"index": 0, "text": text or "", "logprobs": None, "finish_reason": finish}
    return {
        "id": request_id,
        "object": "chat.completion.chunk" if request.kind == "chat" else "text_completion",
        "created": created,
        "model": served_name,
        "choices": [choice],
    }


def usage_chunk(request: Request, served_name: str, request_id: str, created: int) -> dict[str, Any]:
    """stream_options.include_usage's last chunk: no choices, the request's token counts."""
    body = chunk(request, served_name, request_id, created, "")
    body["choices"] = []
    body["usage"] = _usage(request.job, request.job.result["details"]["generated_tokens"])
    return body


def releasable(text: str, stops: list[str]) -> str:
    """The part of streamed text that is final: cut at a stop string, holding back a possible stop's beginning."""
    cut = min((text.find(s) for s in stops if s in text), default=len(text))
    text = text[:cut]
    hold = max((k for s in stops for k in range(1, len(s)) if text.endswith(s[:k])), default=0)
    return text[: len(text) - hold]
