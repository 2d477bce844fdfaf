"""LMI's HTTP contract: GET /ping, POST /invocations (JSON or jsonlines streaming), errors as 424."""

from __future__ import annotations

import json
import logging
import threading
import time
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from queue import Empty
from typing import Any

from local.servers.llm_endpoint.batcher import Batcher
from local.servers.llm_endpoint.engine import Engine
from local.servers.llm_endpoint.request import Job, RequestError, parse_request
from local.servers.llm_endpoint.settings import Settings

LOG = logging.getLogger("local_endpoint")
ERROR_CODE = 424  # what LMI answers for a request it cannot serve
MAX_BODY_BYTES = 8 * 1024 * 1024
REQUEST_TIMEOUT_S = 600.0


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: LocalEndpointServer

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base class's name
        LOG.debug("%s " + format, self.address_string(), *args)

    def _send_json(self, status: int, body: Any) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _error(self, message: str, status: int = ERROR_CODE) -> None:
        self._send_json(status, {"error": message, "code": status})

    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        if self.path.split("?")[0] == "/ping":
            self._send_json(HTTPStatus.OK, {"status": "Healthy"})
        else:
            self._error(f"no such path {self.path}", HTTPStatus.NOT_FOUND)

    def do_POST(self) -> None:  # noqa: N802 - http.server's name
        path = self.path.split("?")[0]
        if path not in ("/invocations", "/predictions", "/predictions/model"):
            self._drain()
            self._error(f"no such path {self.path}", HTTPStatus.NOT_FOUND)
            return
        body = self._read_body()
        if body is None:
            return
        engine = self.server.engine
        try:
            jobs, is_list, stream = parse_request(body, engine.encode, engine.n_positions)
        except RequestError as error:
            self._error(str(error))
            return
        started = time.perf_counter()
        self.server.batcher.submit(jobs)
        if stream:
            self._stream(jobs[0], started)
            return
        failed = self._wait(jobs, started)
        if failed:
            self._error(failed)
            return
        results = [job.result for job in jobs]
        self._send_json(HTTPStatus.OK, results if is_list else results[0])

    def _drain(self) -> None:
        """Read (and drop) a body the server will not serve, so the connection stays usable."""
        try:
            length = int(self.headers.get("Content-Length") or 0)
        except ValueError:
            length = 0
        self.rfile.read(min(max(length, 0), MAX_BODY_BYTES))

    def _read_body(self) -> bytes | None:
        """The request body, or None after answering a missing or oversized Content-Length."""
        try:
            length = int(self.headers.get("Content-Length") or 0)
        except ValueError:
            length = -1
        if length < 0 or length > MAX_BODY_BYTES:
            self.close_connection = True
            self._error(f"body must have a Content-Length of at most {MAX_BODY_BYTES} bytes")
            return None
        return self.rfile.read(length)

    def _wait(self, jobs: list[Job], started: float) -> str | None:
        """Wait for the worker to finish the jobs; the first failure (or a timeout) as a message, else None."""
        deadline = started + REQUEST_TIMEOUT_S
        for job in jobs:
            if not job.done.wait(timeout=max(0.0, deadline - time.perf_counter())):
                return f"timed out after {REQUEST_TIMEOUT_S:.0f} s"
        return next((job.error for job in jobs if job.error), None)

    def _stream(self, job: Job, started: float) -> None:
        """jsonlines over chunked transfer: one {"token": ...} per token, then {"generated_text": ...}."""
        self.send_response(HTTPStatus.OK)
        self.send_header("Content-Type", "application/jsonlines")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        deadline = started + REQUEST_TIMEOUT_S
        while True:
            try:
                item = job.stream.get(timeout=max(0.01, deadline - time.perf_counter()))
            except Empty:
                item = None
                job.error = job.error or f"timed out after {REQUEST_TIMEOUT_S:.0f} s"
            if item is None:
                break
            self._chunk(item)
        job.done.wait(timeout=max(0.0, deadline - time.perf_counter()))
        if job.error or job.result is None:
            self._chunk({"error": job.error or "no result", "code": ERROR_CODE})
        else:
            self._chunk(job.result)
        self.wfile.write(b"0\r\n\r\n")

    def _chunk(self, obj: Any) -> None:
        data = (json.dumps(obj) + "\n").encode()
        self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
        self.wfile.flush()


class LocalEndpointServer(ThreadingHTTPServer):
    """One model behind the LMI contract (Handler), batched by one worker."""

    daemon_threads = True
    request_queue_size = 256  # 50+ clients connecting at once must not overflow the listen backlog

    def __init__(
        self,
        address: tuple[str, int],
        engine: Engine,
        settings: Settings,
    ):
        self.engine = engine
        self.settings = settings
        self.batcher = Batcher(engine, settings)
        super().__init__(address, Handler)

    @property
    def url(self) -> str:
        host, port = self.server_address[:2]
        return f"http://{host}:{port}"

    def server_close(self) -> None:
        super().server_close()
        self.batcher.close()


def start(
    model_dir: str | Path,
    settings: Settings,
    host: str = "127.0.0.1",
    port: int = 0,
) -> tuple[LocalEndpointServer, threading.Thread]:
    """Load the model and serve in a background thread; stop with server.shutdown(); server.server_close()."""
    server = LocalEndpointServer((host, port), Engine(model_dir, settings), settings)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.1}, daemon=True)
    thread.start()
    return server, thread
