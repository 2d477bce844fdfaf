"""Turning rows into training text plus the character spans the loss is computed on.

Formats, detected per file from the first row that has a known field:
- `text`: a ready text (e.g. guanaco-llama2's `<s>[INST] ... [/INST] ... </s>`); every token is supervised.
- instruction rows (dolly `instruction`/`context`/`response`, alpaca `instruction`/`input`/`output`, optional
  `system`): rendered as a user turn and an assistant turn through the chat template.
- `prompt`/`completion`: plain strings are concatenated (TRL's convention); lists of messages are a chat, of
  which only the completion's assistant turns are supervised (assistant turns in the prompt are few-shot
  examples or history: prompt, as in TRL).
- `messages` (OpenAI: `role`/`content`) or `conversations` (ShareGPT: `from`/`value`): multi-turn chats with an
  optional leading system prompt, rendered through the chat template; every assistant turn is supervised.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, NamedTuple

from .rows import DataError, SourcedRow
from .templates import conversation_with_spans

TEXT_FIELD = "text"
INSTRUCTION_FIELD = "instruction"
CONTEXT_FIELDS = ("context", "input")
RESPONSE_FIELDS = ("response", "output")
ROLE_ALIASES = {
    "system": "system",
    "user": "user",
    "human": "user",
    "assistant": "assistant",
    "gpt": "assistant",
    "bot": "assistant",
    "model": "assistant",
}
FORMATS = ("text", "instruction", "prompt_completion", "messages")


class RenderedRow(NamedTuple):
    """Training text, the [start, end) character spans to supervise, and whether an EOS must end the text."""

    text: str
    spans: list[tuple[int, int]]
    needs_eos: bool


def _present(fields: dict[str, Any], name: str) -> bool:
    value = fields.get(name)
    return isinstance(value, str) and value.strip() != ""


def _first_present(fields: dict[str, Any], names: Iterable[str]) -> str | None:
    return next((fields[name] for name in names if _present(fields, name)), None)


def row_format(fields: dict[str, Any]) -> str | None:
    if "messages" in fields or "conversations" in fields:
        return "messages"
    if "prompt" in fields and "completion" in fields:
        return "prompt_completion"
    if TEXT_FIELD in fields:
        return "text"
    if INSTRUCTION_FIELD in fields or any(name in fields for name in RESPONSE_FIELDS):
        return "instruction"
    return None


def detect_format(rows: list[SourcedRow]) -> str:
    """The format of the first row that has a known field."""
    for row in rows:
        found = row_format(row.fields)
        if found:
            return found
    first = rows[0]
    raise DataError(
        f"{first.source}: row {first.row_number}: missing field 'text' (or 'instruction' and "
        f"'response'/'output', 'prompt' and 'completion', 'messages' or 'conversations'); found {sorted(first.fields)}"
    )


def _missing(row: SourcedRow, *alternatives: str) -> DataError:
    field = " (or ".join(f"'{name}'" for name in alternatives) + ")" * (len(alternatives) - 1)
    return DataError(f"{row.source}: row {row.row_number}: missing or empty field {field}")


def _bad(row: SourcedRow, field: str, problem: str) -> DataError:
    return DataError(f"{row.source}: row {row.row_number}: field {field}: {problem}")


def _message(row: SourcedRow, field: str, index: int, raw: Any) -> dict[str, str]:
    where = f"'{field}'[{index}]"
    if not isinstance(raw, dict):
        raise _bad(row, where, f"expected an object, got {type(raw).__name__}")
    role = raw.get("role", raw.get("from"))
    content = raw.get("content", raw.get("value"))
    if role not in ROLE_ALIASES:
        raise _bad(row, where, f"role {role!r} is not one of {', '.join(sorted(ROLE_ALIASES))}")
    if not isinstance(content, str) or not content.strip():
        raise _bad(row, where, "missing or empty 'content'")
    return {"role": ROLE_ALIASES[role], "content": content}


def check_conversation(row: SourcedRow, field: str, messages: list[dict[str, str]]) -> list[dict[str, str]]:
    """A leading system prompt at most, then a user turn first, and at least one assistant turn to learn."""
    roles = [message["role"] for message in messages]
    if "system" in roles[1:]:
        raise _bad(row, f"'{field}'", "a system message may only come first")
    turns = roles[1:] if roles and roles[0] == "system" else roles
    if not turns or turns[0] != "user":
        raise _bad(row, f"'{field}'", "the first non-system message must be from the user")
    if "assistant" not in turns:
        raise _bad(row, f"'{field}'", "no assistant message to learn from")
    return messages


def conversation(row: SourcedRow) -> list[dict[str, str]]:
    field = "messages" if "messages" in row.fields else "conversations"
    raw = row.fields.get(field)
    if not isinstance(raw, list) or not raw:
        raise _missing(row, field)
    return check_conversation(row, field, [_message(row, field, index, item) for index, item in enumerate(raw)])


def instruction_conversation(row: SourcedRow) -> list[dict[str, str]]:
    fields = row.fields
    if not _present(fields, INSTRUCTION_FIELD):
        raise _missing(row, INSTRUCTION_FIELD)
    response = _first_present(fields, RESPONSE_FIELDS)
    if response is None:
        raise _missing(row, *RESPONSE_FIELDS)
    context = _first_present(fields, CONTEXT_FIELDS)
    prompt = fields[INSTRUCTION_FIELD].strip()
    if context is not None:
        prompt = f"{prompt}\n\n{context.strip()}"
    messages = [{"role": "user", "content": prompt}, {"role": "assistant", "content": response.strip()}]
    if _present(fields, "system"):
        messages.insert(0, {"role": "system", "content": fields["system"].strip()})
    return messages


def render_prompt_completion(row: SourcedRow, tokenizer: Any, template: str) -> RenderedRow:
    prompt, completion = row.fields.get("prompt"), row.fields.get("completion")
    if isinstance(prompt, list) and isinstance(completion, list):
        raw = prompt + completion
        messages = [_message(row, "prompt+completion", index, item) for index, item in enumerate(raw)]
        check_conversation(row, "prompt+completion", messages)
        if not any(message["role"] == "assistant" for message in messages[len(prompt) :]):
            raise _bad(row, "'completion'", "no assistant message to learn from")
        return _chat(tokenizer, template, messages, first_supervised=len(prompt))
    if not isinstance(prompt, str) or not prompt.strip():
        raise _missing(row, "prompt")
    if not isinstance(completion, str) or not completion.strip():
        raise _missing(row, "completion")
    return RenderedRow(prompt + completion, [(len(prompt), len(prompt) + len(completion))], True)


def _chat(tokenizer: Any, template: str, messages: list[dict[str, str]], first_supervised: int = 0) -> RenderedRow:
    text, spans = conversation_with_spans(tokenizer, template, messages, first_supervised)
    return RenderedRow(text, spans, False)


def render_row(row: SourcedRow, kind: str, tokenizer: Any, template: str) -> RenderedRow:
    if kind == "text":
        if not _present(row.fields, TEXT_FIELD):
            raise _missing(row, TEXT_FIELD)
        text = row.fields[TEXT_FIELD]
        return RenderedRow(text, [(0, len(text))], True)
    if kind == "prompt_completion":
        return render_prompt_completion(row, tokenizer, template)
    if kind == "messages":
        return _chat(tokenizer, template, conversation(row))
    return _chat(tokenizer, template, instruction_conversation(row))


def render_rows(rows: list[SourcedRow], tokenizer: Any, template: str) -> tuple[str, list[RenderedRow]]:
    """The detected format ('mixed' across files) and one rendered row per row; a bad row raises DataError."""
    by_source: dict[str, list[SourcedRow]] = {}
    for row in rows:
        by_source.setdefault(row.source, []).append(row)
    formats = {source: detect_format(source_rows) for source, source_rows in by_source.items()}
    rendered = [render_row(row, formats[row.source], tokenizer, template) for row in rows]
    kinds = set(formats.values())
    return (kinds.pop() if len(kinds) == 1 else "mixed"), rendered
