"""The HTTP side of the vLLM Neuron contract: routes, JSON answers and server-sent-event streams.

tools/local_endpoint.py's LocalEndpointServer uses VllmHandler for `--backend vllm_neuronx`; the request and
response shapes live in tools/local_endpoint_vllm.py.
"""

from __future__ import annotations

import json
import time
import uuid
from http import HTTPStatus
from queue import Empty
from typing import Any

from tools.local_endpoint import REQUEST_TIMEOUT_S, Handler
from tools.local_endpoint_vllm import (
    FINISH_REASONS,
    OpenAIError,
    Request,
    chunk,
    invocations_kind,
    parse,
    releasable,
    response,
    usage_chunk,
)

ROUTES = {"/v1/chat/completions": "chat", "/v1/completions": "completion", "/invocations": None}


class VllmHandler(Handler):
    """vLLM 0.11's OpenAI server as the HF vLLM Neuron container exposes it on port 8080."""

    def _error(self, message: str, status: int = HTTPStatus.BAD_REQUEST) -> None:
        kind = {HTTPStatus.NOT_FOUND: "NotFoundError", HTTPStatus.INTERNAL_SERVER_ERROR: "InternalServerError"}
        self._refuse(OpenAIError(message, status, kind.get(status, "BadRequestError")))

    def _refuse(self, error: OpenAIError) -> None:
        self._send_json(error.status, error.body())

    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        path = self.path.split("?")[0]
        if path in ("/ping", "/health"):
            self._send_json(HTTPStatus.OK, {})
        elif path == "/v1/models":
            model = {
                "id": self.server.served_model_name,
                "object": "model",
                "created": int(time.time()),
                "owned_by": "vllm",
                "max_model_len": self.server.engine.n_positions,
            }
            self._send_json(HTTPStatus.OK, {"object": "list", "data": [model]})
        else:
            self._error(f"no such path {self.path}", HTTPStatus.NOT_FOUND)

    def do_POST(self) -> None:  # noqa: N802 - http.server's name
        path = self.path.split("?")[0]
        if path == "/ping" or path not in ROUTES:
            self._drain()
            if path == "/ping":
                self._send_json(HTTPStatus.OK, {})
            else:
                self._error(f"no such path {self.path}", HTTPStatus.NOT_FOUND)
            return
        body = self._read_body()
        if body is None:
            return
        try:
            payload = _json(body)
            kind = ROUTES[path] or invocations_kind(payload)
            request = parse(payload, kind, self.server.served_model_name, self.server.engine)
        except OpenAIError as error:
            self._refuse(error)
            return
        started, created = time.perf_counter(), int(time.time())
        request_id = ("chatcmpl-" if kind == "chat" else "cmpl-") + uuid.uuid4().hex
        self.server.batcher.submit([request.job])
        if request.stream:
            self._stream_events(request, request_id, created, started)
            return
        failed = self._wait([request.job], started)
        if failed:
            self._error(failed, HTTPStatus.INTERNAL_SERVER_ERROR)
            return
        self._send_json(HTTPStatus.OK, response(request, self.server.served_model_name, request_id, created))

    def _stream_events(self, request: Request, request_id: str, created: int, started: float) -> None:
        """OpenAI's chunks as server-sent events; text is sent once it cannot turn out to be part of a stop string."""
        self.send_response(HTTPStatus.OK)
        self.send_header("Content-Type", "text/event-stream; charset=utf-8")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        job, name = request.job, self.server.served_model_name
        if request.kind == "chat":
            self._event(chunk(request, name, request_id, created, None))
        streamed, sent = "", 0
        deadline = started + REQUEST_TIMEOUT_S
        while True:
            try:
                item = job.stream.get(timeout=max(0.01, deadline - time.perf_counter()))
            except Empty:
                job.error = job.error or f"timed out after {REQUEST_TIMEOUT_S:.0f} s"
                break
            if item is None:
                break
            streamed += item["token"]["text"]
            ready = releasable(streamed, job.stop)
            if len(ready) > sent:
                self._event(chunk(request, name, request_id, created, ready[sent:]))
                sent = len(ready)
        job.done.wait(timeout=max(0.0, deadline - time.perf_counter()))
        if job.error or job.result is None:
            self._event(
                OpenAIError(job.error or "no result", HTTPStatus.INTERNAL_SERVER_ERROR, "InternalServerError").body()
            )
        else:
            final = job.result["generated_text"]  # the whole answer, cut at a stop string
            finish = FINISH_REASONS[job.result["details"]["finish_reason"]]
            self._event(chunk(request, name, request_id, created, final[sent:], finish))
            if request.include_usage:
                self._event(usage_chunk(request, name, request_id, created))
        self._write_chunk(b"data: [DONE]\n\n")
        self.wfile.write(b"0\r\n\r\n")

    def _event(self, obj: Any) -> None:
        self._write_chunk(f"data: {json.dumps(obj)}\n\n".encode())

    def _write_chunk(self, data: bytes) -> None:
        self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
        self.wfile.flush()


def _json(body: bytes) -> Any:
    try:
        return json.loads(body)
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        raise OpenAIError(f"malformed JSON: {error}") from error
