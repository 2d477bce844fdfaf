"""Offline tokenizers with the chat templates of real model families (Llama 3 Instruct, ChatML/Qwen2, Mistral).

The Jinja templates follow the ones those models ship in tokenizer_config.json; the vocabularies are tiny BPEs
trained here with `tokenizers`, with the families' special tokens added, so nothing touches the hub.
"""

from __future__ import annotations

from dataclasses import dataclass

LLAMA3_TEMPLATE = (
    "{% set loop_messages = messages %}{% for message in loop_messages %}"
    "{% set content = '<|start_header_id|>' + message['role'] + '<|end_header_id|>\n\n'"
    " + message['content'] | trim + '<|eot_id|>' %}"
    "{% if loop.index0 == 0 %}{% set content = bos_token + content %}{% endif %}{{ content }}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|start_header_id|>assistant<|end_header_id|>\n\n' }}{% endif %}"
)
CHATML_TEMPLATE = (  # Qwen2-Instruct's: injects a default system prompt when the conversation has none
    "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}"
    "{{ '<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n' }}{% endif %}"
    "{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)
MISTRAL_TEMPLATE = (  # Mistral-7B-Instruct-v0.1's: [INST] is plain text, answers end with </s>
    "{{ bos_token }}{% for message in messages %}"
    "{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}"
    "{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}{% endif %}"
    "{% if message['role'] == 'user' %}{{ '[INST] ' + message['content'] + ' [/INST]' }}"
    "{% elif message['role'] == 'assistant' %}{{ message['content'] + eos_token}}"
    "{% else %}{{ raise_exception('Only user and assistant roles are supported!') }}{% endif %}{% endfor %}"
)


@dataclass(frozen=True)
class Family:
    name: str
    template: str
    bos: str | None
    eos: str
    specials: tuple[str, ...]
    answer_end: str  # what follows an answer's text inside its supervised span: up to the end-of-turn token


FAMILIES = {
    "llama3": Family("llama3", LLAMA3_TEMPLATE, "<|begin_of_text|>", "<|eot_id|>",
                     ("<|begin_of_text|>", "<|eot_id|>", "<|start_header_id|>", "<|end_header_id|>"), "<|eot_id|>"),
    "chatml": Family("chatml", CHATML_TEMPLATE, None, "<|im_end|>", ("<|im_start|>", "<|im_end|>"), "<|im_end|>"),
    "mistral": Family("mistral", MISTRAL_TEMPLATE, "<s>", "</s>", ("<s>", "</s>"), "</s>"),
}  # fmt: skip


def family_tokenizer(family: Family, texts: list[str]):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tokenizer = Tokenizer(models.BPE(unk_token="<unk>"))
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=400,
        special_tokens=["<unk>", *family.specials],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tokenizer.train_from_iterator(texts, trainer=trainer)
    wrapped = PreTrainedTokenizerFast(
        tokenizer_object=tokenizer, bos_token=family.bos, eos_token=family.eos, unk_token="<unk>"
    )
    wrapped.chat_template = family.template
    wrapped.pad_token = wrapped.eos_token
    return wrapped


GEMMA_TEMPLATE = (  # Gemma-it's turn format: <end_of_turn> then a newline closes every turn
    "{{ bos_token }}{% for message in messages %}"
    "{{ '<start_of_turn>' + ('model' if message['role'] == 'assistant' else message['role']) + '\n'"
    " + message['content'] | trim + '<end_of_turn>\n' }}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<start_of_turn>model\n' }}{% endif %}"
)
GEMMA = Family(
    "gemma", GEMMA_TEMPLATE, "<bos>", "<eos>", ("<bos>", "<eos>", "<start_of_turn>", "<end_of_turn>"), "<end_of_turn>"
)
