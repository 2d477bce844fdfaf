"""LMI NeuronX's request and answer: {"inputs", "parameters"} in, [{"generated_text"}] or {"error", "code"} out."""

from __future__ import annotations

from typing import Any

from ..contract import InvokeError, json_body

SAMPLE_PROMPT = "<s>[INST] <<SYS>>\nAs a data scientist\n<</SYS>>\nWhat is a machine learning? [/INST]"


def build_request(args: Any) -> dict[str, Any]:
    """LMI's body from tools/invoke.py's arguments; the stop sequence defaults to Llama 2's </s>."""
    parameters: dict[str, Any] = {"max_new_tokens": args.max_new_tokens, "do_sample": args.do_sample}
    for name in ("temperature", "top_p", "top_k", "repetition_penalty", "seed"):
        value = getattr(args, name)
        if value is not None:
            parameters[name] = value
    parameters["stop"] = list(args.stop) if args.stop else ["</s>"]
    if args.details:
        parameters["details"] = True
    return {"inputs": args.prompt or SAMPLE_PROMPT, "parameters": parameters}


def parse_response(body: bytes | str, status: int = 200) -> list[str]:
    """The generated texts of an LMI answer, or InvokeError for the {"error", "code"} form and junk."""
    data, text = json_body(body, status)
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
