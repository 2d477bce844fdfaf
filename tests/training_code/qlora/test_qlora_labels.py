"""Completion-only labels on every format and on real chat-template families: prompts -100, answers + EOS kept."""

from __future__ import annotations

import re

import pytest
from finetune.data import IGNORE_INDEX, tokenize_row
from finetune.format import render_rows
from finetune.rows import DataError, read_rows
from finetune.templates import LLAMA2_CHAT_TEMPLATE, TemplateError, conversation_with_spans
from qlora_chat_tokenizers import FAMILIES, family_tokenizer
from qlora_test_helpers import vocab_texts, write_jsonl

SYSTEM = "you answer in one line"
CHAT = [
    {"role": "system", "content": SYSTEM},
    {"role": "user", "content": "explain llama"},
    {"role": "assistant", "content": "a model that learns"},
    {"role": "user", "content": "why adapter"},
    {"role": "assistant", "content": "it trains few weights"},
]


@pytest.fixture(scope="module", params=sorted(FAMILIES))
def family(request):
    texts = vocab_texts() + [message["content"] for message in CHAT]
    return FAMILIES[request.param], family_tokenizer(FAMILIES[request.param], texts)


def supervised_text(tokenizer, ids, labels) -> str:
    return tokenizer.decode([i for i, label in zip(ids, labels, strict=True) if label != IGNORE_INDEX])


def labelled(tmp_path, tokenizer, rows, template=None):
    path = write_jsonl(tmp_path / "train.jsonl", rows)
    kind, rendered = render_rows(read_rows(path), tokenizer, template or tokenizer.chat_template)
    return kind, [tokenize_row(row, tokenizer, train_on_inputs=False) for row in rendered]


def test_messages_supervise_every_assistant_turn_and_nothing_else(tmp_path, family):
    spec, tokenizer = family
    messages = CHAT if spec.name != "mistral" else CHAT[1:]  # Mistral's template refuses system messages
    kind, [example] = labelled(tmp_path, tokenizer, [{"messages": messages}])
    assert kind == "messages"
    answers = [m["content"] for m in messages if m["role"] == "assistant"]
    assert supervised_text(tokenizer, example.input_ids, example.labels) == "".join(
        answer + spec.answer_end for answer in answers
    )
    first_answer = next(i for i, label in enumerate(example.labels) if label != IGNORE_INDEX)
    prompt = tokenizer.decode(example.input_ids[:first_answer])
    assert "explain llama" in prompt and example.labels[:first_answer] == [IGNORE_INDEX] * first_answer
    if spec.name != "mistral":
        assert SYSTEM in prompt
    assert example.labels[-len(spec.answer_end.strip()) :] != [IGNORE_INDEX]  # the end-of-turn mark is learned
    assert tokenizer.eos_token_id in [label for label in example.labels if label != IGNORE_INDEX]


def test_chatml_injected_system_prompt_is_not_trained_on(tmp_path):
    tokenizer = family_tokenizer(FAMILIES["chatml"], vocab_texts())
    _, [example] = labelled(tmp_path, tokenizer, [{"instruction": "explain llama", "response": "a model"}])
    text = tokenizer.decode(example.input_ids)
    assert text.startswith("<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n")
    assert supervised_text(tokenizer, example.input_ids, example.labels) == "a model<|im_end|>"  # not the "\n" after


def test_instruction_rows_and_sharegpt_rows_mask_the_prompt(tmp_path, family):
    spec, tokenizer = family
    rows = [{"instruction": "explain llama", "context": "in short", "response": "a model"}]
    _, [example] = labelled(tmp_path, tokenizer, rows)
    assert supervised_text(tokenizer, example.input_ids, example.labels) == "a model" + spec.answer_end
    sharegpt = [{"conversations": [{"from": "human", "value": "explain llama"}, {"from": "gpt", "value": "a model"}]}]
    _, [from_sharegpt] = labelled(tmp_path, tokenizer, sharegpt)
    assert supervised_text(tokenizer, from_sharegpt.input_ids, from_sharegpt.labels) == "a model" + spec.answer_end


def test_prompt_completion_supervises_the_completion_and_an_added_eos(tmp_path, tokenizer):
    kind, [example] = labelled(
        tmp_path, tokenizer, [{"prompt": "Q: explain llama\nA:", "completion": " a model"}], LLAMA2_CHAT_TEMPLATE
    )
    assert kind == "prompt_completion"
    assert example.input_ids[0] == tokenizer.bos_token_id and example.input_ids[-1] == tokenizer.eos_token_id
    assert supervised_text(tokenizer, example.input_ids, example.labels) == " a model</s>"


def test_llama2_fallback_masks_system_and_inst_and_keeps_eos(tmp_path, tokenizer):
    _, [example] = labelled(tmp_path, tokenizer, [{"messages": CHAT}], LLAMA2_CHAT_TEMPLATE)
    text = tokenizer.decode(example.input_ids)
    assert text.startswith(f"<s>[INST] <<SYS>>\n{SYSTEM}\n<</SYS>>\n\nexplain llama [/INST] a model that learns </s>")
    assert supervised_text(tokenizer, example.input_ids, example.labels) == (
        " a model that learns </s> it trains few weights </s>"
    )


def test_text_rows_and_train_on_inputs_supervise_everything(tmp_path, tokenizer):
    path = write_jsonl(tmp_path / "train.jsonl", [{"instruction": "explain llama", "response": "a model"}])
    _, [row] = render_rows(read_rows(path), tokenizer, LLAMA2_CHAT_TEMPLATE)
    everything = tokenize_row(row, tokenizer, train_on_inputs=True)
    assert everything.labels == everything.input_ids


@pytest.mark.parametrize(
    ("messages", "problem"),
    [
        ([{"role": "user", "content": "hi"}], "no assistant message to learn from"),
        ([{"role": "assistant", "content": "hi"}], "the first non-system message must be from the user"),
        ([{"role": "user", "content": "hi"}, {"role": "robot", "content": "x"}], "'messages'[1]: role 'robot'"),
        ([{"role": "user", "content": "hi"}, {"role": "assistant", "content": ""}], "'messages'[1]: missing or empty"),
        (
            [
                {"role": "user", "content": "a"},
                {"role": "system", "content": "b"},
                {"role": "assistant", "content": "c"},
            ],
            "a system message may only come first",
        ),
    ],
)
def test_bad_conversations_name_file_row_and_field(tmp_path, tokenizer, messages, problem):
    good = {"messages": CHAT}
    path = write_jsonl(tmp_path / "bad.jsonl", [good, {"messages": messages}])
    with pytest.raises(DataError, match=rf"^{re.escape(str(path))}: row 2: field .*{re.escape(problem)}") as error:
        render_rows(read_rows(path), tokenizer, LLAMA2_CHAT_TEMPLATE)
    assert "\n" not in str(error.value)


def test_a_template_that_rewrites_earlier_turns_is_refused(tokenizer):
    # Shows the answer count in front of the whole conversation: adding a turn changes the prefix.
    unstable = "{{ messages | length }}{% for m in messages %}{{ m['content'] }}{% endfor %}"
    with pytest.raises(TemplateError, match="--train_on_inputs"):
        conversation_with_spans(tokenizer, unstable, CHAT[1:3])
