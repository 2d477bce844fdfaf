"""Chat templates: which one renders the training conversations, and where each assistant answer lies in the text.

The template that renders training data is also written into the saved tokenizer, so the served model formats
prompts exactly as training did. A base without a template (Llama 2 base) gets LLAMA2_CHAT_TEMPLATE, the
`<s>[INST] <<SYS>> ... [/INST] answer </s>` format of the seed's guanaco-llama2 data.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .rows import DataError

LLAMA2_CHAT_TEMPLATE = (
    "{%- if messages and messages[0]['role'] == 'system' -%}"
    "{%- set system = messages[0]['content'] | trim -%}{%- set loop_messages = messages[1:] -%}"
    "{%- else -%}{%- set system = '' -%}{%- set loop_messages = messages -%}{%- endif -%}"
    "{%- for message in loop_messages -%}"
    "{%- if message['role'] == 'user' -%}"
    "{{ bos_token }}[INST] {% if loop.first and system %}<<SYS>>\n{{ system }}\n<</SYS>>\n\n{% endif %}"
    "{{ message['content'] | trim }} [/INST]"
    "{%- elif message['role'] == 'assistant' -%}"
    "{{ ' ' + message['content'] | trim + ' ' + eos_token }}"
    "{%- endif -%}"
    "{%- endfor -%}"
)
BUILTIN_TEMPLATES = {"llama2": LLAMA2_CHAT_TEMPLATE}


class TemplateError(DataError):
    """The chat template cannot mark assistant turns (it rewrites earlier turns when a later one is added)."""


def resolve_chat_template(tokenizer: Any, requested: str) -> tuple[str, str]:
    """(template, where it came from): `auto` = the tokenizer's own, else Llama 2; a built-in name; or a file."""
    if requested == "auto":
        own = getattr(tokenizer, "chat_template", None)
        if isinstance(own, str) and own:
            return own, "tokenizer"
        return LLAMA2_CHAT_TEMPLATE, "llama2 (the base tokenizer has none)"
    if requested in BUILTIN_TEMPLATES:
        return BUILTIN_TEMPLATES[requested], requested
    path = Path(requested)
    if not path.is_file():
        raise DataError(f"--chat_template {requested!r}: not 'auto', {', '.join(BUILTIN_TEMPLATES)} or a Jinja file")
    return path.read_text(encoding="utf-8"), str(path)


def render(tokenizer: Any, template: str, messages: list[dict[str, str]], generation_prompt: bool = False) -> str:
    return tokenizer.apply_chat_template(
        messages, chat_template=template, tokenize=False, add_generation_prompt=generation_prompt
    )


def conversation_with_spans(
    tokenizer: Any, template: str, messages: list[dict[str, str]], first_supervised: int = 0
) -> tuple[str, list[tuple[int, int]]]:
    """The rendered conversation and the character spans of the assistant turns from `first_supervised` on.

    A turn's span runs from the end of the conversation-so-far rendered with the generation prompt to the end
    of the conversation rendered through that turn, less trailing whitespace: exactly what the model must
    produce at serving time, up to and including its end-of-turn token (ChatML's `<|im_end|>`, not the newline
    the template writes after it). Earlier assistant turns (few-shot examples, history) stay prompt.
    """
    full = render(tokenizer, template, messages)
    spans = []
    for index, message in enumerate(messages):
        if message["role"] != "assistant" or index < first_supervised:
            continue
        prefix = render(tokenizer, template, messages[:index], generation_prompt=True)
        through = render(tokenizer, template, messages[: index + 1])
        if not (full.startswith(through) and through.startswith(prefix)):
            raise TemplateError(
                "the chat template renders earlier turns differently once a later turn is added, so answer "
                "tokens cannot be located; pass --train_on_inputs or a prefix-stable --chat_template"
            )
        spans.append((len(prefix), max(len(prefix), len(through.rstrip()))))
    return full, spans
