"""local/servers/llm_endpoint --backend vllm_neuronx is real vLLM, started with the container's arguments: checked
with the real `openai` client (chat and text completions, SSE streaming, stop sequences, 400/404 errors) and SageMaker's
/invocations and /ping. The server starts once per session (conftest.vllm_endpoint, ~70 s)."""

from __future__ import annotations

import json
import subprocess
import sys
import urllib.request
from concurrent.futures import ThreadPoolExecutor

import openai
import pytest

from tests.local.servers.serving import MAX_BATCH, N_POSITIONS, ROOT, SERVED_NAME

MESSAGES = [
    {"role": "system", "content": "As a data scientist"},
    {"role": "user", "content": "What is machine learning?"},
]
GREEDY = {"max_tokens": 16, "temperature": 0}

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("vllm")]


def client(server) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{server.url}/v1", api_key="unused", max_retries=0, timeout=60)


def post(url: str, body: dict) -> tuple[int, bytes, str]:
    request = urllib.request.Request(
        url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"}, method="POST"
    )
    try:
        with urllib.request.urlopen(request, timeout=60) as response:
            return response.status, response.read(), response.headers.get("Content-Type", "")
    except urllib.error.HTTPError as error:
        return error.code, error.read(), error.headers.get("Content-Type", "")


def events(raw: bytes) -> list:
    """The JSON payloads of a server-sent-event body, which must end with `data: [DONE]`."""
    blocks = [b for b in raw.decode().split("\n\n") if b]
    assert blocks[-1] == "data: [DONE]" and all(b.startswith("data: ") for b in blocks)
    return [json.loads(b.removeprefix("data: ")) for b in blocks[:-1]]


def long_answer(server) -> tuple[list[dict], str]:
    """Messages whose greedy answer has enough text to cut in the middle (a random model may end early)."""
    for question in ("What is machine learning?", "Explain AWS KMS.", "Give an example of LoRA.", "Why?"):
        messages = [{"role": "user", "content": question}]
        answer = client(server).chat.completions.create(
            model=SERVED_NAME, messages=messages, max_tokens=24, temperature=0
        )
        if len(answer.choices[0].message.content.strip()) >= 6:
            return messages, answer.choices[0].message.content
    pytest.fail("no question produced enough text to cut")


def tokenizer(server):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(server.model_dir), local_files_only=True)


def test_started_with_the_containers_arguments(vllm_endpoint):
    """The log names what changed from the container's command line, and the engine runs the SM_ON_* shape."""
    log = vllm_endpoint.log.read_text()
    assert "local change: --tensor-parallel-size 2 -> 1" in log and "local change: --task generate: dropped" in log
    assert "local change: --enforce-eager: added" in log and "'enforce_eager': True" in log  # no compile warm-up
    # the model worker in the engine core's process: vLLM logs no worker process of its own
    assert "local change: VLLM_ENABLE_V1_MULTIPROCESSING=0: set" in log and "(EngineCore pid=" in log
    assert "(Worker pid=" not in log and "(VllmWorker-0 pid=" not in log
    assert f"'max_model_len': {N_POSITIONS}" in log and f"'max_num_seqs': {MAX_BATCH}" in log  # vLLM's own log
    assert "vllm_neuronx contract; listening on" in log


def test_ping_health_and_models(vllm_endpoint):
    for method in ("GET", "POST"):
        request = urllib.request.Request(
            vllm_endpoint.url + "/ping", data=b"" if method == "POST" else None, method=method
        )
        with urllib.request.urlopen(request, timeout=10) as response:
            assert response.status == 200
    models = client(vllm_endpoint).models.list()
    assert [m.id for m in models.data] == [SERVED_NAME]
    assert models.data[0].model_extra["max_model_len"] == N_POSITIONS


def test_chat_completion_renders_the_models_chat_template(vllm_endpoint):
    api = client(vllm_endpoint)
    answer = api.chat.completions.create(model=SERVED_NAME, messages=MESSAGES, **GREEDY)
    assert answer.object == "chat.completion" and answer.model == SERVED_NAME and answer.id.startswith("chatcmpl-")
    choice = answer.choices[0]
    assert choice.index == 0 and choice.message.role == "assistant" and isinstance(choice.message.content, str)
    assert choice.finish_reason in {"stop", "length"}
    tok = tokenizer(vllm_endpoint)
    rendered = tok.apply_chat_template(MESSAGES, tokenize=False, add_generation_prompt=True)
    assert "<|system|>\nAs a data scientist\n<|user|>" in rendered and rendered.endswith("<|assistant|>\n")
    usage = answer.usage
    assert usage.prompt_tokens == len(tok(rendered, add_special_tokens=False)["input_ids"])
    assert usage.total_tokens == usage.prompt_tokens + usage.completion_tokens
    assert 1 <= usage.completion_tokens <= GREEDY["max_tokens"]
    assert (choice.finish_reason == "length") == (usage.completion_tokens == GREEDY["max_tokens"])
    # The same rendered prompt as a text completion decodes the same greedy answer: the template is the only step.
    # (the template writes the BOS itself; a text completion would add a second one)
    completion = api.completions.create(
        model=SERVED_NAME, prompt=rendered, extra_body={"add_special_tokens": False}, **GREEDY
    )
    assert completion.object == "text_completion" and completion.choices[0].text == choice.message.content
    status, raw, _ = post(vllm_endpoint.url + "/v1/chat/completions", {"messages": MESSAGES, **GREEDY})
    assert status == 200, raw  # `model` is optional in vLLM's bodies (the openai client always sends it)
    assert json.loads(raw)["choices"][0]["message"]["content"] == choice.message.content


def test_streamed_chunks_reassemble_to_the_greedy_answer(vllm_endpoint):
    api = client(vllm_endpoint)
    expected = api.chat.completions.create(model=SERVED_NAME, messages=MESSAGES, **GREEDY)
    stream = api.chat.completions.create(
        model=SERVED_NAME, messages=MESSAGES, stream=True, stream_options={"include_usage": True}, **GREEDY
    )
    chunks = list(stream)
    assert all(c.object == "chat.completion.chunk" and c.id == chunks[0].id for c in chunks)
    assert chunks[0].choices[0].delta.role == "assistant"
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == expected.choices[0].message.content
    assert len([c for c in chunks if c.choices and c.choices[0].delta.content]) > 1, "tokens arrive one by one"
    finishes = [c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason]
    assert finishes == [expected.choices[0].finish_reason]
    assert chunks[-1].choices == [] and chunks[-1].usage == expected.usage
    plain = api.completions.create(model=SERVED_NAME, prompt="Why does overfitting matter?", **GREEDY)
    streamed = api.completions.create(model=SERVED_NAME, prompt="Why does overfitting matter?", stream=True, **GREEDY)
    assert "".join(c.choices[0].text for c in streamed) == plain.choices[0].text


def test_stop_sequences_cut_before_the_stop_string(vllm_endpoint):
    api = client(vllm_endpoint)
    messages, full = long_answer(vllm_endpoint)
    middle = len(full) // 2
    stop = full[middle : middle + 2]
    for stops in (stop, [stop, "never-generated"]):
        cut = api.chat.completions.create(
            model=SERVED_NAME, messages=messages, max_tokens=24, temperature=0, stop=stops
        )
        assert cut.choices[0].message.content == full[: full.find(stop)]
        assert cut.choices[0].finish_reason == "stop"
    stream = api.chat.completions.create(
        model=SERVED_NAME, messages=messages, max_tokens=24, temperature=0, stop=stop, stream=True
    )
    chunks = list(stream)
    assert "".join(c.choices[0].delta.content or "" for c in chunks) == full[: full.find(stop)]
    assert chunks[-1].choices[0].finish_reason == "stop"


def test_too_long_is_a_400(vllm_endpoint):
    """vLLM 0.32 refuses max_tokens over the model length and a prompt that fills it; prompt + max_tokens over it
    is cut to fit (vLLM 0.11, the container's, answers 400: README, what the local run cannot show)."""
    api = client(vllm_endpoint)
    with pytest.raises(openai.BadRequestError) as raised:
        api.chat.completions.create(model=SERVED_NAME, messages=MESSAGES, max_tokens=N_POSITIONS + 1)
    assert raised.value.status_code == 400 and f"max_model_len={N_POSITIONS}" in raised.value.message
    assert raised.value.body["type"] == "BadRequestError" and raised.value.body["code"] == 400
    with pytest.raises(openai.BadRequestError) as raised:
        api.completions.create(model=SERVED_NAME, prompt="word " * N_POSITIONS, max_tokens=1)
    assert f"maximum context length is {N_POSITIONS} tokens" in raised.value.message
    assert api.chat.completions.create(model=SERVED_NAME, messages=MESSAGES, **GREEDY).choices  # and it keeps serving


def test_another_models_name_is_a_404(vllm_endpoint):
    with pytest.raises(openai.NotFoundError) as raised:
        client(vllm_endpoint).chat.completions.create(model="llama-2-7b", messages=MESSAGES, **GREEDY)
    assert raised.value.status_code == 404 and "The model `llama-2-7b` does not exist." in raised.value.message
    assert raised.value.body["type"] == "NotFoundError" and raised.value.body["code"] == 404


def test_invocations_takes_a_chat_body_then_a_prompt_body(vllm_endpoint):
    api = client(vllm_endpoint)
    chat = api.chat.completions.create(model=SERVED_NAME, messages=MESSAGES, **GREEDY)
    status, raw, _ = post(vllm_endpoint.url + "/invocations", {"messages": MESSAGES, **GREEDY})
    body = json.loads(raw)
    assert status == 200 and body["object"] == "chat.completion"
    assert body["choices"][0]["message"]["content"] == chat.choices[0].message.content
    assert body["usage"]["completion_tokens"] == chat.usage.completion_tokens
    assert body["usage"]["prompt_tokens"] == chat.usage.prompt_tokens
    prompt = "Give an example of LoRA."
    text = api.completions.create(model=SERVED_NAME, prompt=prompt, **GREEDY).choices[0].text
    status, raw, _ = post(vllm_endpoint.url + "/invocations", {"prompt": prompt, **GREEDY})
    body = json.loads(raw)
    assert status == 200 and body["object"] == "text_completion" and body["choices"][0]["text"] == text
    status, raw, content_type = post(
        vllm_endpoint.url + "/invocations", {"messages": MESSAGES, "stream": True, **GREEDY}
    )
    assert status == 200 and content_type.startswith("text/event-stream")
    chunks = events(raw)
    assert "".join(c["choices"][0]["delta"].get("content", "") for c in chunks) == chat.choices[0].message.content


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ({"inputs": "LMI's body", "parameters": {"max_new_tokens": 4}}, "prompt"),
        ({"prompt": 7}, "Cannot find suitable handler"),
        ({"messages": MESSAGES, "temperature": -1}, "temperature"),
        ({"messages": MESSAGES, "temperature": 3}, "temperature must be in [0, 2]"),
        ({"messages": MESSAGES, "stop": [""]}, "stop cannot contain an empty string"),
    ],
)
def test_bad_bodies_are_400_with_an_openai_error(vllm_endpoint, body, message):
    status, raw, _ = post(vllm_endpoint.url + "/invocations", body)
    error = json.loads(raw)["error"]
    assert status == 400 and error["type"] == "BadRequestError" and error["code"] == 400
    assert message in error["message"]


def test_what_the_imitation_refused_real_vllm_answers(vllm_endpoint):
    """n > 1 and logprobs (on Neuron logprobs come back empty: README), and /v1/completions' default of 16 tokens."""
    api = client(vllm_endpoint)
    answer = api.chat.completions.create(model=SERVED_NAME, messages=MESSAGES, n=2, logprobs=True, max_tokens=4)
    assert len(answer.choices) == 2 and answer.choices[0].logprobs.content
    default = api.completions.create(model=SERVED_NAME, prompt="Why", temperature=0)
    assert default.usage.completion_tokens <= 16


def test_unknown_fields_are_ignored_and_a_seed_repeats_a_sample(vllm_endpoint):
    api = client(vllm_endpoint)
    sampled = dict(
        model=SERVED_NAME,
        messages=MESSAGES,
        max_tokens=12,
        temperature=0.8,
        top_p=0.9,
        seed=7,
        extra_body={"top_k": 20, "repetition_penalty": 1.1, "ignore_me": True},
    )
    first = api.chat.completions.create(**sampled).choices[0].message.content
    assert api.chat.completions.create(**sampled).choices[0].message.content == first


def test_command_line_refuses_the_other_backends_settings(chat_model_dir):
    for argv, message in (
        (["--sequence-length", "64"], "vllm_neuronx settings"),
        (["--backend", "vllm_neuronx", "--set", "option.n_positions=64"], "LMI settings"),
    ):
        wrong = subprocess.run(
            [sys.executable, "local/servers/llm_endpoint", "--model-dir", str(chat_model_dir), *argv],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert wrong.returncode == 2 and message in wrong.stderr


def test_concurrent_requests_are_batched_and_keep_their_own_answers(vllm_endpoint):
    api = client(vllm_endpoint)
    questions = ["What is machine learning?", "Explain AWS KMS.", "Give an example of LoRA.", "Why overfitting?"]
    conversations = [[{"role": "user", "content": q}] for q in questions]

    def ask(messages):
        return api.chat.completions.create(model=SERVED_NAME, messages=messages, **GREEDY).choices[0].message.content

    alone = [ask(m) for m in conversations]
    with ThreadPoolExecutor(max_workers=MAX_BATCH * 2) as pool:
        together = list(pool.map(ask, conversations * 2))
    assert together == alone * 2, "batching (--max-num-seqs) must not change a greedy answer"
