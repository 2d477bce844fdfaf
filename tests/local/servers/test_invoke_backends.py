"""tools/invoke.py speaks both containers' contracts to the local server: by URL, and through SageMaker's
invoke_endpoint (a runtime client that forwards the request to the server as the endpoint would)."""

from __future__ import annotations

import io
import json
import urllib.error
import urllib.request

import openai
import pytest
from botocore.exceptions import ClientError

from tests.local.servers.serving import N_POSITIONS, SERVED_NAME
from tools import invoke

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("vllm")]  # one vLLM start with test_vllm_contract
GREEDY_FLAGS = ["--no-do-sample", "--max-new-tokens", "8"]


class LocalRuntime:
    """sagemaker-runtime's invoke_endpoint in front of a local server: the body goes to /invocations with its
    ContentType; a non-2xx answer is raised as SageMaker raises it (ModelError with the container's status/body)."""

    def __init__(self, url: str):
        self.url, self.calls = url, []

    def invoke_endpoint(self, *, EndpointName, Body, ContentType, Accept="*/*"):  # noqa: N803 - boto3's names
        self.calls.append({"EndpointName": EndpointName, "ContentType": ContentType, "Body": json.loads(Body)})
        request = urllib.request.Request(
            self.url + "/invocations", data=Body.encode(), headers={"Content-Type": ContentType}, method="POST"
        )
        try:
            with urllib.request.urlopen(request, timeout=60) as response:
                return {"Body": io.BytesIO(response.read()), "ContentType": response.headers["Content-Type"]}
        except urllib.error.HTTPError as error:
            message = error.read().decode()
            raise ClientError(
                {
                    "Error": {"Code": "ModelError", "Message": f"Received client error ({error.code}) from primary"},
                    "OriginalStatusCode": error.code,
                    "OriginalMessage": message,
                },
                "InvokeEndpoint",
            ) from None


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = invoke.main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def sagemaker(monkeypatch, runtime: LocalRuntime) -> None:
    """boto3's session hands out the LocalRuntime as its sagemaker-runtime client."""
    import boto3

    class Session:
        def __init__(self, region_name=None):
            pass

        def client(self, name):
            assert name == "sagemaker-runtime"
            return runtime

    monkeypatch.setattr(boto3.session, "Session", Session)


def test_vllm_chat_by_url_matches_the_openai_clients_answer(vllm_endpoint, capsys):
    api = openai.OpenAI(base_url=f"{vllm_endpoint.url}/v1", api_key="unused", max_retries=0)
    expected = api.chat.completions.create(
        model=SERVED_NAME, messages=invoke.SAMPLE_MESSAGES, max_tokens=8, temperature=0
    )
    code, out, err = run(capsys, "--url", vllm_endpoint.url, "--backend", "vllm_neuronx", *GREEDY_FLAGS)
    assert code == 0, err
    assert out == expected.choices[0].message.content + "\n"
    assert err.startswith("latency: ")
    code, out, _ = run(
        capsys,
        "--url",
        vllm_endpoint.url,
        "--backend",
        "vllm_neuronx",
        "--model",
        SERVED_NAME,
        "--prompt",
        "Explain AWS KMS.",
        *GREEDY_FLAGS,
    )
    user_only = api.chat.completions.create(
        model=SERVED_NAME, messages=[{"role": "user", "content": "Explain AWS KMS."}], max_tokens=8, temperature=0
    )
    assert code == 0 and out == user_only.choices[0].message.content + "\n"


def test_vllm_refusals_are_one_line(vllm_endpoint, capsys):
    too_long = ["--url", vllm_endpoint.url, "--backend", "vllm_neuronx", "--max-new-tokens", str(N_POSITIONS + 1)]
    code, out, err = run(capsys, *too_long)
    assert code == 1 and out == ""
    assert err.startswith("invoke error: the model server rejected the request (HTTP 400 BadRequestError): ")
    assert err.rstrip().endswith("(check the prompt + --max-new-tokens against the sequence length)")
    assert len(err.strip().splitlines()) == 1
    chat_url = vllm_endpoint.url + "/v1/chat/completions"
    code, _, err = run(capsys, "--url", chat_url, "--backend", "vllm_neuronx", "--model", "other", *GREEDY_FLAGS)
    assert code == 1 and "(HTTP 404 NotFoundError): The model `other` does not exist." in err
    # vLLM 0.32's /invocations does not check the name (measured; README: what the local run cannot show)
    code, _, err = run(
        capsys, "--url", vllm_endpoint.url, "--backend", "vllm_neuronx", "--model", "other", *GREEDY_FLAGS
    )
    assert code == 0, err


def test_lmi_body_to_a_vllm_server_is_refused(vllm_endpoint, capsys):
    code, _, err = run(capsys, "--url", vllm_endpoint.url, "--backend", "lmi_neuronx", *GREEDY_FLAGS)
    assert code == 1 and "(LMI code 400)" in err and "Either prompt or prompt_embeds must be provided" in err


def test_sagemaker_invoke_endpoint_in_both_contracts(endpoint, vllm_endpoint, monkeypatch, capsys):
    lmi, vllm = LocalRuntime(endpoint.url), LocalRuntime(vllm_endpoint.url)
    sagemaker(monkeypatch, vllm)
    code, out, err = run(capsys, "--endpoint-name", "ep-vllm", "--backend", "vllm_neuronx", *GREEDY_FLAGS)
    assert code == 0, err
    direct = invoke.invoke_url(vllm_endpoint.url, vllm.calls[-1]["Body"], 60, invoke.parse_chat_response)
    assert out == direct[0] + "\n" and "(endpoint ep-vllm)" in err
    call = vllm.calls[-1]
    assert call["EndpointName"] == "ep-vllm" and call["ContentType"] == "application/json"
    assert call["Body"] == {"messages": invoke.SAMPLE_MESSAGES, "max_tokens": 8, "temperature": 0}
    code, _, err = run(capsys, "--endpoint-name", "ep-vllm", "--backend", "vllm_neuronx", "--max-new-tokens", "999")
    assert code == 1 and "(HTTP 400 BadRequestError): max_tokens=999 cannot be greater than max_model_len" in err
    sagemaker(monkeypatch, lmi)
    code, out, err = run(capsys, "--endpoint-name", "ep-lmi", "--backend", "lmi_neuronx", *GREEDY_FLAGS)
    assert code == 0, err
    assert lmi.calls[-1]["Body"]["inputs"] == invoke.SAMPLE_PROMPT
    assert out == invoke.invoke_url(endpoint.url, lmi.calls[-1]["Body"], 60)[0] + "\n"
    code, _, err = run(capsys, "--endpoint-name", "ep-lmi", "--max-new-tokens", "999")
    assert code == 1 and "(LMI code 424)" in err


def test_fields_neuron_ignores_are_warned_about_and_still_sent(vllm_endpoint, capsys):
    code, out, err = run(
        capsys,
        "--url",
        vllm_endpoint.url,
        "--backend",
        "vllm_neuronx",
        "--seed",
        "7",
        "--min-tokens",
        "2",
        *GREEDY_FLAGS,
    )
    assert code == 0 and out.endswith("\n")
    assert err.startswith("warning: seed, min_tokens: ignored by the vLLM Neuron runner on inf2")
    code, _, err = run(capsys, "--url", vllm_endpoint.url, "--backend", "vllm_neuronx", *GREEDY_FLAGS)
    assert code == 0 and "warning" not in err
