"""tools/local_endpoint.py --backend vllm_neuronx answers like the HF vLLM Neuron container, checked with the real
`openai` client: chat and text completions, SSE streaming, stop sequences, 400/404 errors, SageMaker's /invocations."""

from __future__ import annotations

import json
import subprocess
import sys
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor

import openai
import pytest

from tests.tools.local_endpoint.serving import N_POSITIONS, ROOT, SERVED_NAME, serving

MESSAGES = [
    {"role": "system", "content": "As a data scientist"},
    {"role": "user", "content": "What is machine learning?"},
]
GREEDY = {"max_tokens": 16, "temperature": 0}

pytestmark = pytest.mark.slow


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


def test_ping_health_and_models(vllm_endpoint):
    for method in ("GET", "POST"):
        request = urllib.request.Request(
            vllm_endpoint.url + "/ping", data=b"" if method == "POST" else None, method=method
        )
        with urllib.request.urlopen(request, timeout=10) as response:
            assert response.status == 200
    models = client(vllm_endpoint).models.list()
    assert [m.id for m in models.data] == [SERVED_NAME]


def test_chat_completion_renders_the_models_chat_template(vllm_endpoint):
    api = client(vllm_endpoint)
    answer = api.chat.completions.create(model=SERVED_NAME, messages=MESSAGES, **GREEDY)
    assert answer.object == "chat.completion" and answer.model == SERVED_NAME and answer.id.startswith("chatcmpl-")
    choice = answer.choices[0]
    assert choice.index == 0 and choice.message.role == "assistant" and isinstance(choice.message.content, str)
    assert choice.finish_reason in {"stop", "length"}
    engine = vllm_endpoint.engine
    rendered = engine.apply_chat_template(MESSAGES)
    assert "<|system|>\nAs a data scientist\n<|user|>" in rendered and rendered.endswith("<|assistant|>\n")
    usage = answer.usage
    assert usage.prompt_tokens == len(engine.encode(rendered))
    assert usage.total_tokens == usage.prompt_tokens + usage.completion_tokens
    assert 1 <= usage.completion_tokens <= GREEDY["max_tokens"]
    assert (choice.finish_reason == "length") == (usage.completion_tokens == GREEDY["max_tokens"])
    # The same rendered prompt as a text completion decodes the same greedy answer: the template is the only step.
    completion = api.completions.create(model=SERVED_NAME, prompt=rendered, **GREEDY)
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


def test_prompt_plus_max_tokens_over_the_sequence_length_is_a_400(vllm_endpoint):
    api = client(vllm_endpoint)
    with pytest.raises(openai.BadRequestError) as raised:
        api.chat.completions.create(model=SERVED_NAME, messages=MESSAGES, max_tokens=N_POSITIONS)
    assert raised.value.status_code == 400
    assert f"maximum context length is {N_POSITIONS} tokens" in raised.value.message
    assert raised.value.body["type"] == "BadRequestError" and raised.value.body["code"] == 400
    with pytest.raises(openai.BadRequestError):
        api.completions.create(model=SERVED_NAME, prompt="word " * N_POSITIONS, max_tokens=1)
    assert api.chat.completions.create(model=SERVED_NAME, messages=MESSAGES, **GREEDY).choices  # and it keeps serving


def test_another_models_name_is_a_404(vllm_endpoint):
    with pytest.raises(openai.NotFoundError) as raised:
        client(vllm_endpoint).chat.completions.create(model="llama-2-7b", messages=MESSAGES, **GREEDY)
    assert raised.value.status_code == 404 and raised.value.message.endswith("The model `llama-2-7b` does not exist.")
    assert raised.value.body == {
        "message": "The model `llama-2-7b` does not exist.",
        "type": "NotFoundError",
        "param": None,
        "code": 404,
    }


def test_invocations_takes_a_chat_body_then_a_prompt_body(vllm_endpoint):
    api = client(vllm_endpoint)
    chat = api.chat.completions.create(model=SERVED_NAME, messages=MESSAGES, **GREEDY)
    status, raw, _ = post(vllm_endpoint.url + "/invocations", {"messages": MESSAGES, **GREEDY})
    body = json.loads(raw)
    assert status == 200 and body["object"] == "chat.completion"
    assert body["choices"][0]["message"]["content"] == chat.choices[0].message.content
    assert body["usage"] == chat.usage.model_dump(exclude_none=True)
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
        ({"inputs": "LMI's body", "parameters": {"max_new_tokens": 4}}, "Cannot find suitable handler"),
        ({"messages": MESSAGES, "n": 2}, "n > 1"),
        ({"messages": MESSAGES, "logprobs": True}, "logprobs"),
        ({"messages": MESSAGES, "temperature": -1}, "out of range"),
        ({"messages": MESSAGES, "stop": [""]}, "'stop'"),
        ({"messages": "hello"}, "'messages'"),
        ({"prompt": 7}, "'prompt'"),
    ],
)
def test_bad_bodies_are_400_with_an_openai_error(vllm_endpoint, body, message):
    status, raw, _ = post(vllm_endpoint.url + "/invocations", body)
    error = json.loads(raw)["error"]
    assert status == 400 and error["type"] == "BadRequestError" and error["code"] == 400
    assert message in error["message"]


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


def test_chat_needs_a_chat_template(tiny_model_dir):
    with serving(tiny_model_dir, backend="vllm_neuronx") as server:
        api = client(server)
        with pytest.raises(openai.BadRequestError, match="chat template"):
            api.chat.completions.create(model=str(tiny_model_dir), messages=MESSAGES, **GREEDY)
        status, raw, _ = post(server.url + "/invocations", {"messages": MESSAGES, **GREEDY})
        assert status == 400 and "chat template" in json.loads(raw)["error"]["message"]
        assert api.completions.create(model=str(tiny_model_dir), prompt="Hello", **GREEDY).choices[0].text is not None


def test_command_line_serves_the_vllm_contract(chat_model_dir, tmp_path):
    port_file = tmp_path / "port"
    argv = [
        sys.executable,
        "tools/local_endpoint.py",
        "--backend",
        "vllm_neuronx",
        "--model-dir",
        str(chat_model_dir),
        "--served-model-name",
        "cli-model",
        "--sequence-length",
        "64",
        "--port",
        "0",
        "--port-file",
        str(port_file),
        "--threads",
        "1",
    ]
    process = subprocess.Popen(argv, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        for line in process.stdout:
            if "listening on" in line:
                break
        assert "vllm_neuronx contract" in line
        deadline = time.monotonic() + 30  # the port file follows the log line
        while not (port_file.is_file() and port_file.read_text()) and time.monotonic() < deadline:
            time.sleep(0.05)
        api = openai.OpenAI(base_url=f"http://127.0.0.1:{port_file.read_text()}/v1", api_key="unused", max_retries=0)
        assert api.chat.completions.create(model="cli-model", messages=MESSAGES, **GREEDY).choices
        with pytest.raises(openai.BadRequestError):  # --sequence-length 64 is the limit now
            api.chat.completions.create(model="cli-model", messages=MESSAGES, max_tokens=64)
    finally:
        process.terminate()
        process.wait(timeout=30)
    wrong = subprocess.run(
        [sys.executable, "tools/local_endpoint.py", "--model-dir", str(chat_model_dir), "--sequence-length", "64"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert wrong.returncode == 2 and "vllm_neuronx settings" in wrong.stderr


def test_max_tokens_names_and_the_default_up_to_the_sequence_length(vllm_endpoint):
    api = client(vllm_endpoint)
    short = api.chat.completions.create(model=SERVED_NAME, messages=MESSAGES, max_completion_tokens=5, temperature=0)
    assert 1 <= short.usage.completion_tokens <= 5
    longest = api.chat.completions.create(model=SERVED_NAME, messages=MESSAGES, temperature=0)
    room = N_POSITIONS - longest.usage.prompt_tokens
    assert longest.choices[0].message.content.startswith(short.choices[0].message.content)
    assert longest.usage.completion_tokens <= room
    assert (longest.choices[0].finish_reason == "length") == (longest.usage.completion_tokens == room)


def test_concurrent_requests_are_batched_and_keep_their_own_answers(vllm_endpoint):
    api = client(vllm_endpoint)
    questions = ["What is machine learning?", "Explain AWS KMS.", "Give an example of LoRA.", "Why overfitting?"]
    conversations = [[{"role": "user", "content": q}] for q in questions]

    def ask(messages):
        return api.chat.completions.create(model=SERVED_NAME, messages=messages, **GREEDY).choices[0].message.content

    alone = [ask(m) for m in conversations]
    before = len(vllm_endpoint.batcher.batch_sizes)
    with ThreadPoolExecutor(max_workers=len(conversations) * 2) as pool:
        together = list(pool.map(ask, conversations * 2))
    assert together == alone * 2, "left padding in a batch must not change a greedy answer"
    assert max(vllm_endpoint.batcher.batch_sizes[before:]) > 1
