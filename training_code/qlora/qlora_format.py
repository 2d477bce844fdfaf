"""Turning rows into training text: a ready `text` column, or instruction rows rendered as a chat.

Instruction rows use the tokenizer's chat template when it has one (so training matches how the served model
is prompted), else the Llama 2 `[INST]` format that the seed's guanaco-llama2 data uses.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from qlora_rows import DataError, SourcedRow

TEXT_FIELD = "text"
INSTRUCTION_FIELD = "instruction"
CONTEXT_FIELDS = ("context", "input")
RESPONSE_FIELDS = ("response", "output")


def _present(fields: dict[str, Any], name: str) -> bool:
    value = fields.get(name)
    return isinstance(value, str) and value.strip() != ""


def _first_present(fields: dict[str, Any], names: Iterable[str]) -> str | None:
    return next((fields[name] for name in names if _present(fields, name)), None)


def detect_format(rows: list[SourcedRow]) -> str:
    """`text` or `instruction`, from the first row that has either key."""
    for row in rows:
        if TEXT_FIELD in row.fields:
            return "text"
        if INSTRUCTION_FIELD in row.fields or any(name in row.fields for name in RESPONSE_FIELDS):
            return "instruction"
    first = rows[0]
    raise DataError(
        f"{first.source}: row {first.row_number}: missing field 'text' "
        f"(or 'instruction' and 'response'/'output'); found {sorted(first.fields)}"
    )


def _missing(row: SourcedRow, *alternatives: str) -> DataError:
    field = " (or ".join(f"'{name}'" for name in alternatives) + ")" * (len(alternatives) - 1)
    return DataError(f"{row.source}: row {row.row_number}: missing or empty field {field}")


def llama2_prompt(prompt: str, response: str, bos: str, eos: str) -> str:
    return f"{bos}[INST] {prompt.strip()} [/INST] {response.strip()} {eos}"


def render_instruction(row: SourcedRow, tokenizer: Any) -> str:
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
    if getattr(tokenizer, "chat_template", None):
        messages = [{"role": "user", "content": prompt}, {"role": "assistant", "content": response.strip()}]
        return tokenizer.apply_chat_template(messages, tokenize=False)
    return llama2_prompt(prompt, response, tokenizer.bos_token or "<s>", tokenizer.eos_token or "</s>")


def render_rows(rows: list[SourcedRow], tokenizer: Any) -> tuple[str, list[str]]:
    """The detected format and one training text per row; the first malformed row raises DataError."""
    by_source: dict[str, list[SourcedRow]] = {}
    for row in rows:
        by_source.setdefault(row.source, []).append(row)
    formats = {source: detect_format(source_rows) for source, source_rows in by_source.items()}
    texts = []
    for row in rows:
        if formats[row.source] == "text":
            if not _present(row.fields, TEXT_FIELD):
                raise _missing(row, TEXT_FIELD)
            texts.append(row.fields[TEXT_FIELD])
        else:
            texts.append(render_instruction(row, tokenizer))
    kinds = set(formats.values())
    return (kinds.pop() if len(kinds) == 1 else "mixed"), texts
