"""A local HTTP server with the SageMaker container contract for an encoder classifier (base or pruned).

    python local/servers/encoder_endpoint.py --model-dir DIR [--port 8080] [--workers 1] [--threads 1]

GET /ping is 200 once the model is loaded. POST /invocations runs the endpoint's own handler,
serving_artifacts/encoder_classifier/code/inference.py (input_fn -> predict_fn -> output_fn), on the body:
{"inputs": [["premise", "hypothesis"], ...]} answers [{"label": ..., "score": ...}, ...]; a bad request is a
400 with {"error": ...}. Like one model-server worker per --workers, at most that many requests run the model
at a time; the others wait in line (which is what a load test sees as queueing). Binds 127.0.0.1 only.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import signal
import sys
import threading
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import ModuleType

HANDLER = Path(__file__).resolve().parents[2] / "serving_artifacts" / "encoder_classifier" / "code" / "inference.py"
MAX_BODY_BYTES = 1024 * 1024
LOOPBACK = ("127.0.0.1", "localhost", "::1")


def load_handler(path: Path = HANDLER) -> ModuleType:
    spec = importlib.util.spec_from_file_location("encoder_inference", path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class EncoderServer(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 256

    def __init__(self, address: tuple[str, int], handler: ModuleType, bundle: dict, workers: int) -> None:
        super().__init__(address, _RequestHandler)
        self.handler = handler
        self.bundle = bundle
        self.slots = threading.BoundedSemaphore(workers)

    @property
    def url(self) -> str:
        host, port = self.server_address[:2]
        return f"http://{host}:{port}"


class _RequestHandler(BaseHTTPRequestHandler):
    server: EncoderServer
    protocol_version = "HTTP/1.1"

    def log_message(self, format, *args):  # noqa: A002 - BaseHTTPRequestHandler's signature
        pass

    def _send(self, status: int, body: str) -> None:
        data = body.encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):  # noqa: N802 - http.server's naming
        if self.path == "/ping":
            self._send(HTTPStatus.OK, "{}")
        else:
            self._send(HTTPStatus.NOT_FOUND, json.dumps({"error": f"no route {self.path}"}))

    def do_POST(self):  # noqa: N802
        if self.path != "/invocations":
            self._send(HTTPStatus.NOT_FOUND, json.dumps({"error": f"no route {self.path}"}))
            return
        length = int(self.headers.get("Content-Length") or 0)
        if length > MAX_BODY_BYTES:
            self._send(HTTPStatus.REQUEST_ENTITY_TOO_LARGE, json.dumps({"error": "body too large"}))
            return
        body = self.rfile.read(length)
        handler = self.server.handler
        try:
            pairs = handler.input_fn(body, self.headers.get("Content-Type", "application/json"))
        except (ValueError, UnicodeDecodeError) as error:
            self._send(HTTPStatus.BAD_REQUEST, json.dumps({"error": str(error)}))
            return
        try:
            with self.server.slots:
                prediction = handler.predict_fn(pairs, self.server.bundle)
            answer = handler.output_fn(prediction, self.headers.get("Accept", "application/json"))
        except ValueError as error:  # e.g. an unsupported Accept type
            self._send(HTTPStatus.BAD_REQUEST, json.dumps({"error": str(error)}))
            return
        except Exception as error:  # noqa: BLE001 - the container answers 500, the server keeps serving
            self._send(HTTPStatus.INTERNAL_SERVER_ERROR, json.dumps({"error": f"{type(error).__name__}: {error}"}))
            return
        self._send(HTTPStatus.OK, answer)


def serve(model_dir: str | Path, *, host: str = "127.0.0.1", port: int = 0, workers: int = 1) -> EncoderServer:
    """Load the model and bind (not yet serving: call serve_forever, e.g. in a thread)."""
    if host not in LOOPBACK:
        raise ValueError(f"host {host!r}: this local server binds loopback only")
    handler = load_handler()
    bundle = handler.model_fn(str(model_dir))
    return EncoderServer((host, port), handler, bundle, workers)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model-dir", required=True, help="an exported model folder (config.json, tokenizer)")
    parser.add_argument("--host", default="127.0.0.1", choices=LOOPBACK)
    parser.add_argument("--port", type=int, default=8080)
    parser.add_argument("--workers", type=int, default=1, help="requests that run the model at the same time")
    parser.add_argument("--threads", type=int, default=1, help="torch intra-op threads")
    args = parser.parse_args(argv)
    import torch

    torch.set_num_threads(args.threads)
    server = serve(args.model_dir, host=args.host, port=args.port, workers=args.workers)
    signal.signal(signal.SIGTERM, lambda *_: threading.Thread(target=server.shutdown, daemon=True).start())
    print(f"serving {args.model_dir} on {server.url}", flush=True)
    try:
        server.serve_forever()
    finally:
        server.server_close()


if __name__ == "__main__":
    sys.exit(main())
