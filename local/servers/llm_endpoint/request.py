"""Request validation: an LMI body becomes jobs for the batcher, or a RequestError the server answers with 424."""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass, field
from queue import Queue
from typing import Any

DEFAULT_MAX_NEW_TOKENS = 30
TOP_LEVEL_KEYS = {"inputs", "parameters", "stream"}
# Every parameter the server accepts, with its type; `stop` is TGI's name for stop_sequences.
PARAMETERS: dict[str, type | tuple[type, ...]] = {
    "max_new_tokens": int,
    "temperature": (int, float),
    "top_p": (int, float),
    "top_k": int,
    "do_sample": bool,
    "repetition_penalty": (int, float),
    "stop_sequences": (list, str),
    "stop": (list, str),
    "details": bool,
    "return_full_text": bool,
    "seed": int,
}


class RequestError(ValueError):
    """A request the server refuses; answered as {"error": message, "code": 424}."""


def _check_type(name: str, value: Any, expected: type | tuple[type, ...]) -> None:
    types = expected if isinstance(expected, tuple) else (expected,)
    if isinstance(value, bool) and bool not in types:  # True is an int in Python, not in JSON
        raise RequestError(f"parameter {name!r} must be {_type_names(types)}, got {json.dumps(value)}")
    if not isinstance(value, types):
        raise RequestError(f"parameter {name!r} must be {_type_names(types)}, got {json.dumps(value)}")


def _type_names(types: tuple[type, ...]) -> str:
    names = {int: "an integer", float: "a number", bool: "a boolean", list: "a list of strings", str: "a string"}
    return " or ".join(dict.fromkeys(names[t] for t in types))


@dataclass(frozen=True)
class Sampling:
    """The settings a whole batch shares; requests with different ones go in different batches."""

    do_sample: bool = False
    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = 50
    repetition_penalty: float = 1.0
    seed: int | None = None


@dataclass
class Job:
    """One prompt of one request, as the worker sees it; the worker fills result or error, then sets done."""

    prompt: str
    input_ids: list[int]
    sampling: Sampling
    max_new_tokens: int
    stop: list[str]
    details: bool
    return_full_text: bool
    stream: Queue | None = None
    result: dict[str, Any] | None = None
    error: str | None = None
    done: threading.Event = field(default_factory=threading.Event)
    # decoding state, owned by the worker
    generated: int = 0
    finished_at: int | None = None
    finish_reason: str = "length"
    streamed_text: str = ""

    def batch_key(self) -> tuple:
        # A seeded request runs alone, so the same seed always gives the same text.
        return (self.sampling, id(self)) if self.sampling.seed is not None else (self.sampling,)


def parse_request(body: bytes, encode, n_positions: int) -> tuple[list[Job], bool, bool]:
    """Jobs for the body, whether the input was a list, and whether to stream; RequestError if malformed."""
    payload = _payload(body)
    prompts, is_list = _prompts(payload)
    stream = _stream(payload, is_list)
    p = _parameters(payload)
    max_new_tokens = p.get("max_new_tokens", DEFAULT_MAX_NEW_TOKENS)
    if max_new_tokens < 1:
        raise RequestError("'max_new_tokens' must be at least 1")
    stop = _stop_sequences(p)
    sampling = _sampling(p)
    jobs = []
    for prompt in prompts:
        ids = encode(prompt)
        if len(ids) + max_new_tokens > n_positions:
            raise RequestError(
                f"input of {len(ids)} tokens + max_new_tokens {max_new_tokens} exceeds n_positions {n_positions}"
            )
        jobs.append(
            Job(
                prompt=prompt,
                input_ids=ids,
                sampling=sampling,
                max_new_tokens=max_new_tokens,
                stop=stop,
                details=bool(p.get("details", False)),
                return_full_text=bool(p.get("return_full_text", False)),
                stream=Queue() if stream else None,
            )
        )
    return jobs, is_list, stream


def _payload(body: bytes) -> dict[str, Any]:
    """The body as a JSON object with known top-level fields only."""
    try:
        payload = json.loads(body)
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        raise RequestError(f"malformed JSON: {error}") from error
    if not isinstance(payload, dict):
        raise RequestError("the body must be a JSON object with 'inputs'")
    unknown = sorted(set(payload) - TOP_LEVEL_KEYS)
    if unknown:
        raise RequestError(f"unknown field {unknown[0]!r}; known: {', '.join(sorted(TOP_LEVEL_KEYS))}")
    return payload


def _prompts(payload: dict[str, Any]) -> tuple[list[str], bool]:
    """The prompts and whether 'inputs' was a list (a list is answered with a list)."""
    inputs = payload.get("inputs")
    is_list = isinstance(inputs, list)
    prompts = inputs if is_list else [inputs]
    if inputs is None or not prompts or not all(isinstance(p, str) for p in prompts):
        raise RequestError("'inputs' must be a non-empty string or a non-empty list of strings")
    if any(not p.strip() for p in prompts):
        raise RequestError("'inputs' holds an empty prompt")
    return prompts, is_list


def _stream(payload: dict[str, Any], is_list: bool) -> bool:
    """Whether to stream; LMI streams a single input only."""
    stream = payload.get("stream", False)
    if not isinstance(stream, bool):
        raise RequestError("'stream' must be a boolean")
    if stream and is_list:
        raise RequestError("'stream' needs a single string input")
    return stream


def _parameters(payload: dict[str, Any]) -> dict[str, Any]:
    """The known, well-typed parameters; a null one counts as left out."""
    params = payload.get("parameters") or {}
    if not isinstance(params, dict):
        raise RequestError("'parameters' must be an object")
    for name, value in params.items():
        if name not in PARAMETERS:
            raise RequestError(f"unknown parameter {name!r}; known: {', '.join(sorted(PARAMETERS))}")
        if value is not None:
            _check_type(name, value, PARAMETERS[name])
    return {k: v for k, v in params.items() if v is not None}


def _stop_sequences(p: dict[str, Any]) -> list[str]:
    """stop_sequences (or TGI's `stop`) as a list of non-empty strings."""
    stop = p.get("stop_sequences", p.get("stop", []))
    stop = [stop] if isinstance(stop, str) else stop
    if not all(isinstance(s, str) and s for s in stop):
        raise RequestError("stop sequences must be non-empty strings")
    return stop


def _sampling(p: dict[str, Any]) -> Sampling:
    """The batch-wide settings; sampling ones are range-checked only when do_sample uses them."""
    do_sample = p.get("do_sample", False)
    if do_sample:
        checks = {
            "temperature": p.get("temperature", 1.0) > 0,
            "top_p": 0 < p.get("top_p", 1.0) <= 1,
            "top_k": p.get("top_k", 50) >= 0,
        }
        bad = [name for name, ok in checks.items() if not ok]
        if bad:
            raise RequestError(f"parameter {bad[0]!r} out of range: temperature > 0, 0 < top_p <= 1, top_k >= 0")
    if p.get("repetition_penalty", 1.0) <= 0:
        raise RequestError("'repetition_penalty' must be > 0")
    if not do_sample:
        return Sampling(repetition_penalty=float(p.get("repetition_penalty", 1.0)))
    return Sampling(
        True,
        float(p.get("temperature", 1.0)),
        float(p.get("top_p", 1.0)),
        int(p.get("top_k", 50)),
        float(p.get("repetition_penalty", 1.0)),
        p.get("seed"),
    )
