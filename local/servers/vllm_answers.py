"""What real vLLM answers for a model folder, asked through the `openai` client, and how far its token
log-probabilities lie from transformers' on the same tokens.

A model family vLLM loads wrongly (a multiplier ignored, a norm or a tied head missed, a rope variant misread)
still answers some text; only its numbers show it. vLLM returns the log-probability of each token it chose
(`logprobs`, with the token ids: `return_tokens_as_token_ids`); transformers scores the same prompt and answer
tokens in one forward pass. Both run in float32 here, so the gap is kernel rounding unless the model differs.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from pathlib import Path

from local.servers.vllm_server import serve
from stacks.serving.backends.vllm_neuronx.config import NeuronOptions, sm_on_environment

QUESTION = "What is machine learning?"
MAX_TOKENS = 24


@dataclass(kw_only=True)
class VllmAnswer:
    """One greedy chat answer: its text, the token ids and log-probabilities vLLM reported, and the timings."""

    text: str
    prompt_tokens: int
    token_ids: list[int]
    logprobs: list[float]
    ready_s: float
    answer_s: float
    local_changes: list[str] = field(default_factory=list)


def _token_id(token: str) -> int:
    """vLLM's `token_id:<n>` form of a returned token (return_tokens_as_token_ids)."""
    return int(token.removeprefix("token_id:"))


def ask_vllm(
    model_dir: Path, log: Path, served_name: str = "tiny", question: str = QUESTION, max_tokens: int = MAX_TOKENS
) -> VllmAnswer:
    """Start vLLM on model_dir with the vllm_neuronx container's arguments (batch 4, TP 2 -> 1 locally, the
    sequence length capped at the model's context), ask one greedy chat question (max_tokens tokens, past an EOS
    too), stop it."""
    import openai

    positions = json.loads((model_dir / "config.json").read_text(encoding="utf-8"))["max_position_embeddings"]
    neuron = NeuronOptions(sequence_length=min(NeuronOptions().sequence_length, positions))
    environment = sm_on_environment(model=str(model_dir), served_model_name=served_name, neuron=neuron)
    with log.open("w") as log_file:
        server, notes = serve(model_dir, environment, log=log_file)
        with server:
            ready = server.wait_ready()
            api = openai.OpenAI(base_url=server.url + "/v1", api_key="unused", max_retries=0, timeout=300)
            started = time.monotonic()
            answer = api.chat.completions.create(
                model=served_name,
                messages=[{"role": "user", "content": question}],
                max_tokens=max_tokens,
                temperature=0,
                logprobs=True,
                # every answer has max_tokens tokens to compare, also where the model's greedy choice is EOS
                extra_body={"return_tokens_as_token_ids": True, "ignore_eos": True},
            )
            answer_s = time.monotonic() - started
    content = answer.choices[0].logprobs.content
    return VllmAnswer(
        text=answer.choices[0].message.content,
        prompt_tokens=answer.usage.prompt_tokens,
        token_ids=[_token_id(item.token) for item in content],
        logprobs=[item.logprob for item in content],
        ready_s=ready,
        answer_s=answer_s,
        local_changes=notes,
    )


def transformers_logprobs(model_dir: Path, answer: VllmAnswer, question: str = QUESTION) -> tuple[int, list[float]]:
    """(prompt tokens, log-probability of each of vLLM's answer tokens) from transformers in float32, the prompt
    rendered by the model's own chat template as vLLM renders it."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    prompt = tokenizer.apply_chat_template(
        [{"role": "user", "content": question}], add_generation_prompt=True, tokenize=True, return_dict=True
    )["input_ids"]
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32).eval()
    ids = torch.tensor([list(prompt) + answer.token_ids])
    with torch.no_grad():
        scores = torch.log_softmax(model(ids).logits[0].float(), dim=-1)
    positions = range(len(prompt) - 1, len(prompt) - 1 + len(answer.token_ids))
    return len(prompt), [scores[p, t].item() for p, t in zip(positions, answer.token_ids, strict=True)]


def logprob_gap(model_dir: Path, answer: VllmAnswer, question: str = QUESTION) -> float:
    """Largest |vLLM - transformers| log-probability over the answer's tokens; ValueError if the prompts differ."""
    prompt_tokens, reference = transformers_logprobs(model_dir, answer, question)
    if prompt_tokens != answer.prompt_tokens:
        raise ValueError(f"vLLM counted {answer.prompt_tokens} prompt tokens, the chat template gives {prompt_tokens}")
    return max((abs(a - b) for a, b in zip(answer.logprobs, reference, strict=True)), default=0.0)
