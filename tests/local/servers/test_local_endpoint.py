"""local/servers/llm_endpoint answers like the LMI container: ping, invocations (single, list, stream), 424 errors,
batching of concurrent requests, and serving.properties as the source of its limits."""

from __future__ import annotations

import json
import subprocess
import sys
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from local.servers.llm_endpoint import Settings, load_settings, parse_properties

ROOT = Path(__file__).resolve().parents[3]
MAX_BATCH = 4
N_POSITIONS = 128
PROMPTS = [
    "<s>[INST] What is machine learning? [/INST]",
    "[INST] <<SYS>>\nAs a cloud architect\n<</SYS>>\nExplain AWS KMS. [/INST]",
    "Why does overfitting matter?",
    "Give an example of LoRA.",
]
GREEDY = {"max_new_tokens": 12, "details": True}

pytestmark = pytest.mark.slow


def post(url: str, body: bytes | str | dict, timeout: float = 60) -> tuple[int, bytes, str]:
    """(status, raw body, content type) of a POST; HTTP errors are returned, not raised."""
    data = body if isinstance(body, bytes) else (body if isinstance(body, str) else json.dumps(body)).encode()
    request = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"}, method="POST")
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return response.status, response.read(), response.headers.get("Content-Type", "")
    except urllib.error.HTTPError as error:
        return error.code, error.read(), error.headers.get("Content-Type", "")


def invoke(server, payload: dict | bytes | str) -> tuple[int, object]:
    status, raw, _ = post(server.url + "/invocations", payload)
    return status, json.loads(raw)


def ok(server, payload: dict):
    status, body = invoke(server, payload)
    assert status == 200, body
    return body


def assert_lengths(result: dict, max_new_tokens: int) -> None:
    details = result["details"]
    assert details["finish_reason"] in {"length", "eos_token", "stop_sequence"}
    assert 1 <= details["generated_tokens"] <= max_new_tokens
    if details["finish_reason"] == "length":
        assert details["generated_tokens"] == max_new_tokens


def test_ping(endpoint):
    with urllib.request.urlopen(endpoint.url + "/ping", timeout=10) as response:
        assert response.status == 200


def test_single_invocation_defaults_to_30_new_tokens(endpoint):
    result = ok(endpoint, {"inputs": PROMPTS[0], "parameters": {"details": True}})
    assert isinstance(result["generated_text"], str)
    assert result["details"]["inputs"] == PROMPTS[0]
    assert_lengths(result, 30)
    plain = ok(endpoint, {"inputs": PROMPTS[0]})
    assert set(plain) == {"generated_text"}
    assert plain["generated_text"] == result["generated_text"]  # greedy is deterministic


def test_list_input_is_batched_and_matches_single_requests(endpoint):
    singles = [ok(endpoint, {"inputs": p, "parameters": GREEDY}) for p in PROMPTS]
    batched = ok(endpoint, {"inputs": PROMPTS, "parameters": GREEDY})
    assert isinstance(batched, list) and len(batched) == len(PROMPTS)
    for single, together in zip(singles, batched, strict=True):
        assert_lengths(together, GREEDY["max_new_tokens"])
        assert together["generated_text"] == single["generated_text"], "left padding must not change the answer"
    assert max(endpoint.batcher.batch_sizes) > 1


def test_stream_sends_jsonlines_tokens_then_the_text(endpoint):
    expected = ok(endpoint, {"inputs": PROMPTS[1], "parameters": GREEDY})
    status, raw, content_type = post(
        endpoint.url + "/invocations", {"inputs": PROMPTS[1], "parameters": GREEDY, "stream": True}
    )
    assert status == 200 and "jsonlines" in content_type
    lines = [json.loads(line) for line in raw.decode().splitlines()]
    tokens, final = lines[:-1], lines[-1]
    assert tokens and all(set(line) == {"token"} and isinstance(line["token"]["id"], int) for line in tokens)
    assert final["generated_text"] == expected["generated_text"]
    assert final["generated_text"].startswith("".join(line["token"]["text"] for line in tokens))
    assert len(tokens) == expected["details"]["generated_tokens"]


def test_every_documented_parameter_is_accepted(endpoint):
    parameters = {
        "max_new_tokens": 6,
        "temperature": 0.7,
        "top_p": 0.9,
        "top_k": 20,
        "do_sample": True,
        "repetition_penalty": 1.1,
        "stop_sequences": ["zzzz"],
        "details": True,
        "return_full_text": True,
        "seed": 7,
    }
    first = ok(endpoint, {"inputs": PROMPTS[2], "parameters": parameters})
    assert first["generated_text"].startswith(PROMPTS[2])
    assert_lengths(first, 6)
    again = ok(endpoint, {"inputs": PROMPTS[2], "parameters": parameters})
    assert again["generated_text"] == first["generated_text"], "the same seed must give the same text"
    tgi_style = ok(endpoint, {"inputs": PROMPTS[2], "parameters": {"stop": ["</s>"], "do_sample": True}})
    assert isinstance(tgi_style["generated_text"], str)


def test_stop_sequence_cuts_the_text(endpoint):
    for prompt in PROMPTS:  # bounded: a random model may end early on some prompt
        full = ok(endpoint, {"inputs": prompt, "parameters": {"max_new_tokens": 20}})["generated_text"]
        if len(full.strip()) >= 6:
            break
    else:
        pytest.fail("no prompt produced enough text to cut")
    middle = len(full) // 2
    stop = full[middle : middle + 2]
    parameters = {"max_new_tokens": 20, "stop_sequences": [stop], "details": True}
    cut = ok(endpoint, {"inputs": prompt, "parameters": parameters})
    assert cut["details"]["finish_reason"] == "stop_sequence"
    assert cut["generated_text"] == full[: full.find(stop)]


@pytest.mark.parametrize(
    "body",
    [
        pytest.param(b'{"inputs": "hi", ', id="malformed-json"),
        pytest.param(b"[1, 2]", id="not-an-object"),
        pytest.param({"inputs": "hi", "parameters": {"max_tokens": 5}}, id="unknown-parameter"),
        pytest.param({"inputs": "hi", "options": {}}, id="unknown-field"),
        pytest.param({"inputs": ""}, id="empty-input"),
        pytest.param({"inputs": []}, id="empty-list"),
        pytest.param({"parameters": {}}, id="no-inputs"),
        pytest.param({"inputs": "hi", "parameters": {"max_new_tokens": "5"}}, id="wrong-type"),
        pytest.param({"inputs": "hi", "parameters": {"max_new_tokens": 0}}, id="zero-tokens"),
        pytest.param({"inputs": "hi", "parameters": {"max_new_tokens": N_POSITIONS}}, id="over-n-positions"),
        pytest.param({"inputs": "word " * N_POSITIONS}, id="overlong-input"),
        pytest.param({"inputs": ["a", "b"], "stream": True}, id="stream-list"),
    ],
)
def test_bad_requests_get_424_and_the_server_keeps_serving(endpoint, body):
    status, answer = invoke(endpoint, body)
    assert status == 424
    assert answer["code"] == 424 and isinstance(answer["error"], str) and answer["error"]
    assert ok(endpoint, {"inputs": "still there?", "parameters": {"max_new_tokens": 2}})["generated_text"] is not None


def test_unknown_path_is_404(endpoint):
    assert post(endpoint.url + "/nope", {"inputs": "x"})[0] == 404


def test_fifty_concurrent_requests_are_all_answered_in_batches(endpoint):
    before = len(endpoint.batcher.batch_sizes)

    def one(i: int):
        return invoke(endpoint, {"inputs": f"{PROMPTS[i % 4]} {i}", "parameters": {"max_new_tokens": 3 + i % 3}})

    with ThreadPoolExecutor(max_workers=50) as pool:
        answers = list(pool.map(one, range(50)))
    assert [status for status, _ in answers] == [200] * 50
    assert all(isinstance(body["generated_text"], str) for _, body in answers)
    sizes = endpoint.batcher.batch_sizes[before:]
    assert sum(sizes) == 50
    assert max(sizes) == MAX_BATCH and len(sizes) < 50


def run_invoke(url: str, *flags: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "tools/invoke.py", "--url", url, *flags], cwd=ROOT, capture_output=True, text=True, timeout=120
    )


def test_invoke_tool_works_unchanged(endpoint):
    expected = ok(endpoint, {"inputs": PROMPTS[0], "parameters": {"max_new_tokens": 8, "stop": ["</s>"]}})
    result = run_invoke(endpoint.url, "--prompt", PROMPTS[0], "--max-new-tokens", "8", "--no-do-sample")
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout == expected["generated_text"] + "\n"
    assert "latency" in result.stderr
    sample = run_invoke(endpoint.url, "--max-new-tokens", "16", "--seed", "3", "--details")  # the seed's sample prompt
    assert sample.returncode == 0, sample.stdout + sample.stderr
    refused = run_invoke(endpoint.url, "--max-new-tokens", str(N_POSITIONS))
    assert refused.returncode == 1 and "424" in refused.stderr


def test_properties_template_rendered_and_overridden(tmp_path):
    template = ROOT / "stacks" / "serving" / "backends" / "lmi_neuronx" / "serving.properties"
    assert load_settings(template) == Settings()  # unrendered {{...}} values: defaults
    rendered = tmp_path / "serving.properties"
    rendered.write_text(
        "# comment\nengine=Python\noption.n_positions = 512\noption.max_rolling_batch_size=8\noption.dtype=bf16\n"
    )
    assert load_settings(rendered) == Settings(max_batch=8, n_positions=512, dtype="bf16")
    assert load_settings(rendered, ["option.max_rolling_batch_size=1"]).max_batch == 1
    static = parse_properties("option.rolling_batch=disable\noption.batch_size=2\noption.max_rolling_batch_size=8")
    assert Settings.from_properties(static).max_batch == 2
    with pytest.raises(ValueError, match="line 1: got 'no equals sign here'; expected key=value"):
        parse_properties("no equals sign here")
    with pytest.raises(ValueError, match="option.dtype: set twice"):
        parse_properties("option.dtype=fp16\noption.dtype=bf16")
    with pytest.raises(ValueError):
        load_settings(rendered, ["option.dtype=int3"])


def test_n_positions_is_capped_by_the_model(tiny_model_dir):
    from local.servers.llm_endpoint import Engine

    engine = Engine(tiny_model_dir, Settings(n_positions=4096, dtype="fp16"))  # fp16 runs as fp32 on a CPU
    assert engine.n_positions == 512  # finetune.tiny's max_position_embeddings
    assert engine.encode("<s>hi") == engine.encode("hi")  # exactly one BOS either way
