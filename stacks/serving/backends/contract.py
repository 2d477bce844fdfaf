"""What every backend's invoke contract shares: the one error a refused or malformed answer raises."""

from __future__ import annotations

import json
from typing import Any


class InvokeError(Exception):
    """The endpoint answered, but not with generated text; the message says why in one line."""


def json_body(body: bytes | str, status: int) -> tuple[Any, str]:
    """(parsed JSON, text) of an answer, or InvokeError naming the status for anything else."""
    text = body.decode("utf-8", errors="replace") if isinstance(body, bytes) else body
    try:
        return json.loads(text), text
    except json.JSONDecodeError:
        raise InvokeError(f"HTTP {status}: not JSON: {text[:200]!r}") from None
