"""tools/invoke.py speaks LMI's and vLLM's request/response contracts to a URL, to SageMaker, and finds the endpoint."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import SimpleNamespace

import pytest
from botocore.exceptions import ClientError

from tools import invoke


class _Lmi(BaseHTTPRequestHandler):
    """A stand-in LMI server: echoes the request's shape, refuses prompts containing 'bad' with a 424."""

    requests: list = []

    def do_POST(self):  # noqa: N802
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        _Lmi.requests.append((self.path, body))
        if "bad" in body["inputs"]:
            status, answer = 424, {"error": "Input too long for n_positions 2048", "code": 424}
        else:
            status, answer = 200, {"generated_text": f"{len(body['parameters'])} parameters"}
        data = json.dumps(answer).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args):
        pass


@pytest.fixture(scope="module")
def url():
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Lmi)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


def test_sample_request_goes_to_invocations_and_prints_text_and_latency(url, capsys):
    assert invoke.main(["--url", url]) == 0
    out, err = capsys.readouterr()
    assert out.strip() == "3 parameters"
    assert err.startswith("latency: ") and " ms (" in err
    path, body = _Lmi.requests[-1]
    assert path == "/invocations"
    assert body == {
        "inputs": invoke.SAMPLE_PROMPT,
        "parameters": {"max_new_tokens": 300, "do_sample": True, "stop": ["</s>"]},
    }


def test_a_424_is_reported_in_one_clear_line(url, capsys):
    assert invoke.main(["--url", url, "--prompt", "bad prompt", "--no-do-sample", "--seed", "7"]) == 1
    out, err = capsys.readouterr()
    assert out == ""
    assert err.strip().splitlines() == [
        "invoke error: the model server rejected the request (LMI code 424): Input too long for n_positions 2048"
        " (check the prompt length against option.n_positions and the parameters)"
    ]
    parameters = _Lmi.requests[-1][1]["parameters"]
    assert parameters == {"max_new_tokens": 300, "do_sample": False, "seed": 7, "stop": ["</s>"]}


def test_unreachable_url_is_one_line(capsys):
    assert invoke.main(["--url", "http://127.0.0.1:9", "--timeout", "2"]) == 1
    assert capsys.readouterr().err.startswith("invoke error: cannot reach http://127.0.0.1:9/invocations")


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ('{"generated_text": "hi"}', ["hi"]),
        ('[{"generated_text": "a"}, {"generated_text": "b"}]', ["a", "b"]),
        ('{"generated_text": "x", "details": {"finish_reason": "length"}}', ["x"]),
    ],
)
def test_parse_response_forms(body, expected):
    assert invoke.parse_response(body) == expected


@pytest.mark.parametrize("body", ["not json", '{"text": "x"}', '{"error": "boom", "code": 424}'])
def test_parse_response_rejects(body):
    with pytest.raises(invoke.InvokeError):
        invoke.parse_response(body)


class _Runtime:
    def __init__(self, error=None, body=b'{"generated_text": "from sagemaker"}'):
        self.error, self.body, self.calls = error, body, []

    def invoke_endpoint(self, **kwargs):
        self.calls.append(kwargs)
        if self.error:
            raise self.error
        import io

        return {"Body": io.BytesIO(self.body)}


def test_sagemaker_runtime_success_and_model_error():
    runtime = _Runtime()
    assert invoke.invoke_sagemaker(runtime, "ep", {"inputs": "x", "parameters": {}}) == ["from sagemaker"]
    assert runtime.calls[0]["EndpointName"] == "ep" and runtime.calls[0]["ContentType"] == "application/json"
    model_error = ClientError(
        {
            "Error": {"Code": "ModelError", "Message": "Received client error (424) from primary"},
            "OriginalStatusCode": 424,
            "OriginalMessage": '{"error": "prompt too long", "code": 424}',
        },
        "InvokeEndpoint",
    )
    with pytest.raises(invoke.InvokeError, match=r"LMI code 424\): prompt too long"):
        invoke.invoke_sagemaker(_Runtime(error=model_error), "ep", {"inputs": "x"})


def test_endpoint_name_comes_from_the_stack_outputs():
    class _Cfn:
        def describe_stacks(self, StackName):  # noqa: N803
            assert StackName == "llm-inf2-dev-Serving"
            return {"Stacks": [{"Outputs": [{"OutputKey": "EndpointName", "OutputValue": "ep-123"}]}]}

    assert invoke.endpoint_from_stack(_Cfn(), invoke.stack_for_env("dev")) == "ep-123"


def test_backend_comes_from_the_flag_then_the_env_config(monkeypatch):
    assert invoke.parse_args(["--url", "http://x"]).backend == "lmi_neuronx"
    assert invoke.parse_args(["--env", "dev"]).backend == invoke.backend_of(invoke._config("dev"))
    vllm_config = SimpleNamespace(serving=SimpleNamespace(backend="vllm_neuronx"))
    monkeypatch.setattr(invoke, "_config", lambda env: vllm_config)
    assert invoke.parse_args(["--env", "prod"]).backend == "vllm_neuronx"
    assert invoke.parse_args(["--env", "prod", "--backend", "lmi_neuronx"]).backend == "lmi_neuronx"
    assert invoke.backend_of(SimpleNamespace(serving=SimpleNamespace())) == "lmi_neuronx"  # before the field


def test_chat_request_maps_the_flags_to_openai_fields():
    args = invoke.parse_args(
        [
            "--url",
            "http://x",
            "--backend",
            "vllm_neuronx",
            "--prompt",
            "hi",
            "--top-p",
            "0.9",
            "--temperature",
            "0.7",
            "--seed",
            "3",
            "--stop",
            "###",
            "--max-new-tokens",
            "20",
        ]
    )
    assert invoke.build_chat_request(args) == {
        "messages": [{"role": "user", "content": "hi"}],
        "max_tokens": 20,
        "temperature": 0.7,
        "top_p": 0.9,
        "seed": 3,
        "stop": ["###"],
    }
    greedy = invoke.parse_args(["--url", "http://x", "--backend", "vllm_neuronx", "--no-do-sample"])
    assert invoke.build_chat_request(greedy) == {
        "messages": invoke.SAMPLE_MESSAGES,
        "max_tokens": 300,
        "temperature": 0,
    }


def test_fields_the_neuron_runner_ignores_are_named():
    """REFERENCE: optimum-neuron's runner passes no per-request generators or logits processors."""
    args = invoke.parse_args(["--url", "http://x", "--backend", "vllm_neuronx", "--min-p", "0.1", "--min-tokens", "2"])
    body = invoke.build_chat_request(args)
    assert body["min_p"] == 0.1 and body["min_tokens"] == 2
    assert invoke.neuron_ignored(body) == ["min_p", "min_tokens"]
    assert invoke.neuron_ignored({"messages": [], "seed": 0, "logit_bias": {"5": 1}, "logprobs": True}) == [
        "seed",
        "logit_bias",
        "logprobs",
    ]
    assert invoke.neuron_ignored({"messages": [], "logprobs": False, "temperature": 0}) == []


def test_a_vllm_request_with_a_seed_is_warned_about_before_it_is_sent(capsys):
    assert (
        invoke.main(["--url", "http://127.0.0.1:9", "--backend", "vllm_neuronx", "--seed", "7", "--timeout", "2"]) == 1
    )
    err = capsys.readouterr().err.splitlines()
    assert err[0].startswith("warning: seed: ignored by the vLLM Neuron runner on inf2")
    assert err[1].startswith("invoke error: cannot reach")


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ('{"choices": [{"index": 0, "message": {"role": "assistant", "content": "hi"}}]}', ["hi"]),
        ('{"object": "text_completion", "choices": [{"index": 0, "text": "t"}]}', ["t"]),
    ],
)
def test_parse_chat_response_forms(body, expected):
    assert invoke.parse_chat_response(body) == expected


@pytest.mark.parametrize(
    "body",
    ["not json", '{"choices": []}', '{"choices": [{"message": {}}]}', '{"error": {"message": "m", "code": 400}}'],
)
def test_parse_chat_response_rejects(body):
    with pytest.raises(invoke.InvokeError):
        invoke.parse_chat_response(body)


def _scaled_to_zero(start_s: float, on_copy=None):
    """The emulator's copy cycle of one component, idle past its alarm (copies 0), on a clock the retries advance."""
    from local.emulator.inference_components import Component, CopyCycle

    now = [0.0]
    component = Component("dev-component", "arn:c", "ep", "AllTraffic", {"ModelName": "m"}, copy_count=1)
    serve = lambda body: b'{"generated_text": "awake"}'  # noqa: E731
    cycle = CopyCycle(component, serve=serve, idle_s=1800, start_s=start_s, clock=lambda: now[0], on_copy=on_copy)
    now[0] = 1800.0
    cycle.tick()
    assert component.copy_count == 0
    return cycle, component, lambda seconds: now.__setitem__(0, now[0] + seconds)


def test_a_request_at_zero_copies_is_retried_with_backoff_until_the_first_copy_serves():
    cycle, component, sleep = _scaled_to_zero(start_s=240)
    said = []
    texts = invoke.invoke_sagemaker(
        cycle, "ep", {"inputs": "x"}, component="dev-component", wait_s=900, sleep=sleep, say=said.append
    )
    assert texts == ["awake"]
    # 5 + 10 + 20 + 40 + 60 + 60 = 195 s < 240 s of start-up: the seventh wait (255 s) reaches the copy
    assert [line.split("retrying in ")[1].split(" s")[0] for line in said] == ["5", "10", "20", "40", "60", "60", "60"]
    assert "has no copy running (scaled to zero)" in said[0] and "(0 s waited)" in said[0]
    assert component.log == [
        "dev-component: copies 1 -> 0 (idle alarm: no request for 1800 s)",
        "dev-component: request refused, no copy: starting one",
        "dev-component: copies 0 -> 1 (NoCapacityInvocationFailures alarm: a copy started)",
    ]


def test_the_copy_starts_once_as_the_count_goes_from_zero_to_one():
    started = []
    cycle, component, sleep = _scaled_to_zero(start_s=240, on_copy=lambda: started.append(component.copy_count))
    component = cycle.component
    assert invoke.invoke_sagemaker(
        cycle, "ep", {"inputs": "x"}, component="dev-component", wait_s=900, sleep=sleep
    ) == ["awake"]
    invoke.invoke_sagemaker(cycle, "ep", {"inputs": "x"}, component="dev-component", sleep=sleep)
    assert started == [0], "started while the count was 0, once"
    assert component.copy_count == 1


def test_a_copy_slower_than_the_wait_fails_with_one_line():
    cycle, _, sleep = _scaled_to_zero(start_s=600)
    with pytest.raises(invoke.InvokeError, match=r"no capacity .* \(after 75 s of retries; raise --wait-for-copy\)$"):
        invoke.invoke_sagemaker(cycle, "ep", {"inputs": "x"}, component="dev-component", wait_s=100, sleep=sleep)


def test_a_component_endpoint_refuses_a_request_without_the_component():
    cycle, _, sleep = _scaled_to_zero(start_s=60)
    with pytest.raises(invoke.InvokeError, match="Inference Component Name header is required"):
        invoke.invoke_sagemaker(cycle, "ep", {"inputs": "x"}, wait_s=900, sleep=sleep)
