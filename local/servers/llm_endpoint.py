"""A local model server with a serving container's HTTP contract, for a merged HF model folder.

    python local/servers/llm_endpoint.py --model-dir DIR [--properties serving.properties] [--set KEY=VALUE ...]
                                   [--host 127.0.0.1] [--port 8080]
    python local/servers/llm_endpoint.py --backend vllm_neuronx --model-dir DIR [--served-model-name NAME]
                                   [--batch-size 4] [--sequence-length 2048] [--tensor-parallel-size 2]

--backend lmi_neuronx (the default) is a stand-in for LMI (DJL Serving) NeuronX's contract, below: the LMI
container does not run here. Another backend runs the local server its record names (`serve_cli(args)`):
--backend vllm_neuronx starts real vLLM (.venv-vllm) with the arguments the Hugging Face vLLM Neuron container
derives from the same SM_ON_* values the stack sets (local/servers/vllm_server.py).

GET /ping is 200 once the model is loaded. POST /invocations takes
{"inputs": str | [str], "parameters": {...}, "stream": bool} and answers {"generated_text": ...} (a list of
those for a list input), jsonlines tokens when streaming, or {"error": ..., "code": 424} with HTTP 424.
Settings come from the same serving.properties the endpoint uses: option.max_rolling_batch_size (requests
batched together), option.n_positions (input + output tokens; capped at the model's max_position_embeddings)
and option.dtype. An unrendered template value such as {{n_positions}} counts as unset.

Concurrent requests go to one queue; a single worker takes up to max_rolling_batch_size compatible ones
(same sampling settings), left-pads them, runs one `generate` and hands each its own result: its own
max_new_tokens, stop sequences and finish reason. Standard library only, besides torch and transformers.
"""

from __future__ import annotations

import argparse
import json
import logging
import re
import signal
import sys
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from queue import Empty, Queue
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from stacks.config.serving_properties import parse as parse_properties  # noqa: E402
from stacks.serving.backends import backend, names  # noqa: E402

LOG = logging.getLogger("local_endpoint")

BACKENDS = names()  # serving.backend values: whose HTTP contract the server speaks (stacks/serving/backends/)
STAND_IN = "local.servers.llm_endpoint"  # this module: the lmi_neuronx record's local server
ERROR_CODE = 424  # what LMI answers for a request it cannot serve
DEFAULT_MAX_NEW_TOKENS = 30
DEFAULT_PROPERTIES = {"option.max_rolling_batch_size": "4", "option.n_positions": "2048", "option.dtype": "fp32"}
DTYPES = {"fp32": "float32", "fp16": "float16", "bf16": "bfloat16"}
TOP_LEVEL_KEYS = {"inputs", "parameters", "stream"}
# Every parameter the server accepts, with its type; `stop` is TGI's name for stop_sequences.
PARAMETERS: dict[str, type | tuple[type, ...]] = {
    "max_new_tokens": int,
    "temperature": (int, float),
    "top_p": (int, float),
    "top_k": int,
    "do_sample": bool,
    "repetition_penalty": (int, float),
    "stop_sequences": (list, str),
    "stop": (list, str),
    "details": bool,
    "return_full_text": bool,
    "seed": int,
}
MAX_BODY_BYTES = 8 * 1024 * 1024
REQUEST_TIMEOUT_S = 600.0
_PLACEHOLDER = re.compile(r"\{\{.*?\}\}")


class RequestError(ValueError):
    """A request the server refuses; answered as {"error": message, "code": 424}."""


# ---------------------------------------------------------------------------------------------- settings


@dataclass(frozen=True)
class Settings:
    max_batch: int = 4
    n_positions: int = 2048
    dtype: str = "fp32"
    batch_window_s: float = 0.005  # how long an idle worker waits for companions of a first request

    @classmethod
    def from_properties(cls, props: dict[str, str], batch_window_s: float = 0.005) -> Settings:
        """Settings from serving.properties values; unrendered {{...}} values fall back to the defaults."""
        merged = dict(DEFAULT_PROPERTIES)
        merged.update({k: v for k, v in props.items() if not _PLACEHOLDER.search(v)})
        rolling = merged.get("option.rolling_batch", "auto").lower()
        key = "option.batch_size" if rolling == "disable" else "option.max_rolling_batch_size"
        max_batch = int(merged.get(key, merged["option.max_rolling_batch_size"]))
        n_positions = int(merged["option.n_positions"])
        dtype = merged["option.dtype"].lower()
        if max_batch < 1 or n_positions < 2 or dtype not in DTYPES:
            raise ValueError(f"bad settings: max batch {max_batch}, n_positions {n_positions}, dtype {dtype!r}")
        return cls(max_batch=max_batch, n_positions=n_positions, dtype=dtype, batch_window_s=batch_window_s)


def load_settings(properties: str | Path | None, overrides: list[str] | None = None, **kwargs: Any) -> Settings:
    props = parse_properties(Path(properties).read_text(encoding="utf-8"), str(properties)) if properties else {}
    for item in overrides or []:
        key, sep, value = item.partition("=")
        if not sep:
            raise ValueError(f"--set takes KEY=VALUE, got {item!r}")
        props[key.strip()] = value.strip()
    return Settings.from_properties(props, **kwargs)


# ---------------------------------------------------------------------------------------------- requests


def _check_type(name: str, value: Any, expected: type | tuple[type, ...]) -> None:
    types = expected if isinstance(expected, tuple) else (expected,)
    if isinstance(value, bool) and bool not in types:  # True is an int in Python, not in JSON
        raise RequestError(f"parameter {name!r} must be {_type_names(types)}, got {json.dumps(value)}")
    if not isinstance(value, types):
        raise RequestError(f"parameter {name!r} must be {_type_names(types)}, got {json.dumps(value)}")


def _type_names(types: tuple[type, ...]) -> str:
    names = {int: "an integer", float: "a number", bool: "a boolean", list: "a list of strings", str: "a string"}
    return " or ".join(dict.fromkeys(names[t] for t in types))


@dataclass(frozen=True)
class Sampling:
    """The settings a whole batch shares; requests with different ones go in different batches."""

    do_sample: bool = False
    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = 50
    repetition_penalty: float = 1.0
    seed: int | None = None


@dataclass
class Job:
    """One prompt of one request, as the worker sees it; the worker fills result or error, then sets done."""

    prompt: str
    input_ids: list[int]
    sampling: Sampling
    max_new_tokens: int
    stop: list[str]
    details: bool
    return_full_text: bool
    stream: Queue | None = None
    result: dict[str, Any] | None = None
    error: str | None = None
    done: threading.Event = field(default_factory=threading.Event)
    # decoding state, owned by the worker
    generated: int = 0
    finished_at: int | None = None
    finish_reason: str = "length"
    streamed_text: str = ""

    def batch_key(self) -> tuple:
        # A seeded request runs alone, so the same seed always gives the same text.
        return (self.sampling, id(self)) if self.sampling.seed is not None else (self.sampling,)


def parse_request(body: bytes, encode, n_positions: int) -> tuple[list[Job], bool, bool]:
    """Jobs for the body, whether the input was a list, and whether to stream; RequestError if malformed."""
    try:
        payload = json.loads(body)
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        raise RequestError(f"malformed JSON: {error}") from error
    if not isinstance(payload, dict):
        raise RequestError("the body must be a JSON object with 'inputs'")
    unknown = sorted(set(payload) - TOP_LEVEL_KEYS)
    if unknown:
        raise RequestError(f"unknown field {unknown[0]!r}; known: {', '.join(sorted(TOP_LEVEL_KEYS))}")
    inputs = payload.get("inputs")
    is_list = isinstance(inputs, list)
    prompts = inputs if is_list else [inputs]
    if inputs is None or not prompts or not all(isinstance(p, str) for p in prompts):
        raise RequestError("'inputs' must be a non-empty string or a non-empty list of strings")
    if any(not p.strip() for p in prompts):
        raise RequestError("'inputs' holds an empty prompt")
    stream = payload.get("stream", False)
    if not isinstance(stream, bool):
        raise RequestError("'stream' must be a boolean")
    if stream and is_list:
        raise RequestError("'stream' needs a single string input")
    params = payload.get("parameters") or {}
    if not isinstance(params, dict):
        raise RequestError("'parameters' must be an object")
    for name, value in params.items():
        if name not in PARAMETERS:
            raise RequestError(f"unknown parameter {name!r}; known: {', '.join(sorted(PARAMETERS))}")
        if value is not None:
            _check_type(name, value, PARAMETERS[name])
    p = {k: v for k, v in params.items() if v is not None}
    max_new_tokens = p.get("max_new_tokens", DEFAULT_MAX_NEW_TOKENS)
    if max_new_tokens < 1:
        raise RequestError("'max_new_tokens' must be at least 1")
    stop = p.get("stop_sequences", p.get("stop", []))
    stop = [stop] if isinstance(stop, str) else stop
    if not all(isinstance(s, str) and s for s in stop):
        raise RequestError("stop sequences must be non-empty strings")
    do_sample = p.get("do_sample", False)
    if do_sample:
        checks = {
            "temperature": p.get("temperature", 1.0) > 0,
            "top_p": 0 < p.get("top_p", 1.0) <= 1,
            "top_k": p.get("top_k", 50) >= 0,
        }
        bad = [name for name, ok in checks.items() if not ok]
        if bad:
            raise RequestError(f"parameter {bad[0]!r} out of range: temperature > 0, 0 < top_p <= 1, top_k >= 0")
    if p.get("repetition_penalty", 1.0) <= 0:
        raise RequestError("'repetition_penalty' must be > 0")
    sampling = (
        Sampling(
            True,
            float(p.get("temperature", 1.0)),
            float(p.get("top_p", 1.0)),
            int(p.get("top_k", 50)),
            float(p.get("repetition_penalty", 1.0)),
            p.get("seed"),
        )
        if do_sample
        else Sampling(repetition_penalty=float(p.get("repetition_penalty", 1.0)))
    )
    jobs = []
    for prompt in prompts:
        ids = encode(prompt)
        if len(ids) + max_new_tokens > n_positions:
            raise RequestError(
                f"input of {len(ids)} tokens + max_new_tokens {max_new_tokens} exceeds n_positions {n_positions}"
            )
        jobs.append(
            Job(
                prompt=prompt,
                input_ids=ids,
                sampling=sampling,
                max_new_tokens=max_new_tokens,
                stop=stop,
                details=bool(p.get("details", False)),
                return_full_text=bool(p.get("return_full_text", False)),
                stream=Queue() if stream else None,
            )
        )
    return jobs, is_list, stream


# ---------------------------------------------------------------------------------------------- model


class Engine:
    """A causal LM and its tokenizer; `run` decodes one batch of jobs with a single `generate`."""

    def __init__(self, model_dir: str | Path, settings: Settings):
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        self.torch = torch
        dtype = DTYPES[settings.dtype]
        if dtype == "float16" and not torch.cuda.is_available():
            LOG.info("option.dtype=fp16 runs as fp32 on CPU")
            dtype = "float32"
        self.device = "cuda" if torch.cuda.is_available() else "cpu"
        self.tokenizer = AutoTokenizer.from_pretrained(str(model_dir), local_files_only=True)
        self.tokenizer_lock = threading.Lock()
        self.model = AutoModelForCausalLM.from_pretrained(
            str(model_dir), dtype=getattr(torch, dtype), local_files_only=True
        ).to(self.device)
        self.model.eval()
        tok = self.tokenizer
        self.eos_id = tok.eos_token_id
        self.pad_id = tok.pad_token_id if tok.pad_token_id is not None else self.eos_id
        self.bos_id = tok.bos_token_id
        limit = getattr(self.model.config, "max_position_embeddings", None) or settings.n_positions
        if limit < settings.n_positions:
            LOG.info("n_positions %d capped at the model's max_position_embeddings %d", settings.n_positions, limit)
        self.n_positions = min(settings.n_positions, limit)

    def encode(self, prompt: str) -> list[int]:
        """Token ids with exactly one leading BOS, whether or not the prompt spells out `<s>` itself."""
        with self.tokenizer_lock:  # request threads and the worker share one Rust tokenizer
            ids = list(self.tokenizer(prompt, add_special_tokens=False)["input_ids"])
        if self.bos_id is not None and (not ids or ids[0] != self.bos_id):
            ids.insert(0, self.bos_id)
        return ids

    def apply_chat_template(self, messages: list[dict[str, str]]) -> str:
        """The prompt text the tokenizer's own chat template makes of messages, ending in the assistant's turn."""
        with self.tokenizer_lock:
            return self.tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)

    def decode(self, ids: list[int], skip_special_tokens: bool = True) -> str:
        with self.tokenizer_lock:
            return self.tokenizer.decode(ids, skip_special_tokens=skip_special_tokens)

    def _update(self, job: Job, new_ids: list[int]) -> None:
        """Count a row's new token and decide whether the row has finished, and why."""
        job.generated = len(new_ids)
        if job.finished_at is not None:
            return
        if self.eos_id is not None and new_ids and new_ids[-1] == self.eos_id:
            job.finished_at, job.finish_reason = job.generated, "eos_token"
        elif job.stop and any(s in self.decode(new_ids) for s in job.stop):  # on the text the client gets
            job.finished_at, job.finish_reason = job.generated, "stop_sequence"
        elif job.generated >= job.max_new_tokens:
            job.finished_at, job.finish_reason = job.generated, "length"

    def run(self, jobs: list[Job]) -> None:
        torch = self.torch
        from transformers import GenerationConfig, StoppingCriteria, StoppingCriteriaList

        width = max(len(job.input_ids) for job in jobs)
        input_ids = torch.full((len(jobs), width), self.pad_id, dtype=torch.long)
        attention_mask = torch.zeros((len(jobs), width), dtype=torch.long)
        for row, job in enumerate(jobs):  # left padding: every prompt ends where generation starts
            input_ids[row, width - len(job.input_ids) :] = torch.tensor(job.input_ids)
            attention_mask[row, width - len(job.input_ids) :] = 1
        engine = self
        rows_ids: list[list[int]] = [[] for _ in jobs]  # each row's generated ids so far

        class PerRowStop(StoppingCriteria):
            """Each row's own max_new_tokens, stop sequences and EOS; runs before the streamer sees a step."""

            def __call__(self, ids, scores, **kwargs):
                for row, job in enumerate(jobs):
                    if job.finished_at is None:
                        rows_ids[row] = ids[row, width:].tolist()
                        engine._update(job, rows_ids[row])
                return torch.tensor([job.finished_at is not None for job in jobs], device=ids.device)

        class RowStreamer:
            """Sends each streaming row its tokens; generate calls put() with the prompt first, then per step."""

            def __init__(self):
                self.prompt_seen = False
                self.sent = [0] * len(jobs)

            def put(self, value):
                if not self.prompt_seen:
                    self.prompt_seen = True
                    return
                for row, job in enumerate(jobs):
                    limit = job.finished_at if job.finished_at is not None else job.generated
                    if job.stream is None or self.sent[row] >= limit:
                        continue
                    self.sent[row] += 1
                    token_id = rows_ids[row][self.sent[row] - 1]
                    text = engine.decode(rows_ids[row][: self.sent[row]])
                    piece = ""
                    if not text.endswith("\ufffd"):  # else half of a multi-byte character: wait for the rest
                        piece, job.streamed_text = text[len(job.streamed_text) :], text
                    job.stream.put({"token": {"id": token_id, "text": piece, "special": token_id == engine.eos_id}})

            def end(self):
                pass

        s = jobs[0].sampling
        config = GenerationConfig(
            max_new_tokens=max(job.max_new_tokens for job in jobs),
            do_sample=s.do_sample,
            repetition_penalty=s.repetition_penalty,
            pad_token_id=self.pad_id,
            eos_token_id=self.eos_id,
            bos_token_id=self.bos_id,
            **({"temperature": s.temperature, "top_p": s.top_p, "top_k": s.top_k} if s.do_sample else {}),
        )
        if s.seed is not None:
            torch.manual_seed(s.seed)
        streaming = any(job.stream is not None for job in jobs)
        with torch.inference_mode():
            output = self.model.generate(
                input_ids=input_ids.to(self.device),
                attention_mask=attention_mask.to(self.device),
                generation_config=config,
                stopping_criteria=StoppingCriteriaList([PerRowStop()]),
                streamer=RowStreamer() if streaming else None,
            )
        for row, job in enumerate(jobs):
            new_ids = output[row, width:].tolist()
            end = job.finished_at if job.finished_at is not None else min(len(new_ids), job.max_new_tokens)
            job.result = self._result(job, new_ids[:end])

    def _result(self, job: Job, new_ids: list[int]) -> dict[str, Any]:
        text = self.decode(new_ids)
        if job.finish_reason == "stop_sequence":
            cut = min((text.find(s) for s in job.stop if s in text), default=-1)
            text = text[:cut] if cut >= 0 else text
        result: dict[str, Any] = {"generated_text": job.prompt + text if job.return_full_text else text}
        if job.details:
            result["details"] = {
                "finish_reason": job.finish_reason,
                "generated_tokens": len(new_ids),
                "inputs": job.prompt,
                "input_tokens": len(job.input_ids),
                "tokens": [{"id": i, "text": self.decode([i], skip_special_tokens=False)} for i in new_ids],
            }
        return result


# ---------------------------------------------------------------------------------------------- batcher


class Batcher:
    """One queue, one worker: takes up to max_batch compatible jobs, runs them as one batch, repeats."""

    def __init__(self, engine: Engine, settings: Settings):
        self.engine = engine
        self.max_batch = settings.max_batch
        self.n_positions = engine.n_positions
        self.window_s = settings.batch_window_s
        self.queue: deque[Job] = deque()
        self.cond = threading.Condition()
        self.stopping = False
        self.batches = 0
        self.batch_sizes: list[int] = []
        self.worker = threading.Thread(target=self._loop, name="batcher", daemon=True)
        self.worker.start()

    def submit(self, jobs: list[Job]) -> None:
        with self.cond:
            self.queue.extend(jobs)
            self.cond.notify()

    def close(self) -> None:
        with self.cond:
            self.stopping = True
            self.cond.notify()
        self.worker.join(timeout=30)

    def _take(self) -> list[Job]:
        """The oldest job and the next compatible ones, up to max_batch and n_positions (caller holds cond)."""
        first = self.queue.popleft()
        batch, key = [first], first.batch_key()
        widest, longest = len(first.input_ids), first.max_new_tokens
        for job in list(self.queue):
            if len(batch) >= self.max_batch:
                break
            w, n = max(widest, len(job.input_ids)), max(longest, job.max_new_tokens)
            if job.batch_key() == key and w + n <= self.n_positions:
                self.queue.remove(job)
                batch.append(job)
                widest, longest = w, n
        return batch

    def _loop(self) -> None:
        while True:
            with self.cond:
                while not self.queue and not self.stopping:
                    self.cond.wait(timeout=1.0)
                if self.stopping:
                    break
                window_ends = time.monotonic() + self.window_s  # let requests sent at the same moment join
                while len(self.queue) < self.max_batch and not self.stopping:
                    left = window_ends - time.monotonic()
                    if left <= 0:
                        break
                    self.cond.wait(timeout=left)
                batch = self._take()
            self.batches += 1
            self.batch_sizes.append(len(batch))
            try:
                self.engine.run(batch)
            except Exception as error:  # noqa: BLE001 - every failure goes back to its requests as a 424
                LOG.exception("batch of %d failed", len(batch))
                for job in batch:
                    job.error = f"{type(error).__name__}: {error}"
            for job in batch:
                if job.stream is not None:
                    job.stream.put(None)
                job.done.set()
        with self.cond:  # answer whatever is left, so no handler waits forever
            for job in self.queue:
                job.error = "server shutting down"
                if job.stream is not None:
                    job.stream.put(None)
                job.done.set()
            self.queue.clear()


# ---------------------------------------------------------------------------------------------- HTTP


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


VLLM_FLAGS = ("served_model_name", "batch_size", "sequence_length", "tensor_parallel_size")


def check_flags(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """LMI's settings come from serving.properties; vLLM Neuron's from its SM_ON_* values."""
    if args.backend == "lmi_neuronx" and any(getattr(args, name) for name in VLLM_FLAGS):
        parser.error(
            "--batch-size, --sequence-length, --tensor-parallel-size and --served-model-name are vllm_neuronx settings"
        )
    if args.backend == "vllm_neuronx" and (args.properties or args.set):
        parser.error("--properties and --set are LMI settings; vllm_neuronx takes --batch-size and --sequence-length")


def main(argv: list[str] | None = None) -> int | None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model-dir", required=True, help="merged Hugging Face model folder (with tokenizer)")
    parser.add_argument("--properties", help="serving.properties (rendered, or a template: {{...}} means unset)")
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override a property, e.g. option.max_rolling_batch_size=1",
    )
    parser.add_argument("--backend", choices=BACKENDS, default="lmi_neuronx", help="whose HTTP contract to serve")
    parser.add_argument("--served-model-name", help="vllm_neuronx: the `model` requests name (SM_ON_SERVED_MODEL_NAME)")
    parser.add_argument("--batch-size", type=int, help="vllm_neuronx: requests decoded together (SM_ON_BATCH_SIZE)")
    parser.add_argument("--sequence-length", type=int, help="vllm_neuronx: prompt + max_tokens (SM_ON_SEQUENCE_LENGTH)")
    parser.add_argument("--tensor-parallel-size", type=int, help="vllm_neuronx: SM_ON_TENSOR_PARALLEL_SIZE (1 here)")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8080, help="0 picks a free port")
    parser.add_argument("--port-file", help="write the bound port here once /ping answers")
    parser.add_argument("--batch-window-ms", type=float, default=5.0, help="wait for companions of a first request")
    parser.add_argument("--threads", type=int, default=0, help="torch CPU threads (0: torch's default)")
    parser.add_argument("-v", "--verbose", action="store_true")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.INFO, format="%(asctime)s %(message)s")
    check_flags(parser, args)
    server = backend(args.backend).local_server
    if server != STAND_IN:  # another container's contract: its own local server (e.g. real vLLM), in the foreground
        return backend(args.backend).local_server_module().serve_cli(args)
    settings = load_settings(args.properties, args.set, batch_window_s=args.batch_window_ms / 1000)
    if args.threads:
        import torch

        torch.set_num_threads(args.threads)
    loaded = time.perf_counter()
    engine = Engine(args.model_dir, settings)
    server = LocalEndpointServer((args.host, args.port), engine, settings)
    LOG.info(
        "model loaded in %.1f s; lmi_neuronx contract; max batch %d, n_positions %d, dtype %s; listening on %s",
        time.perf_counter() - loaded,
        settings.max_batch,
        server.engine.n_positions,
        settings.dtype,
        server.url,
    )
    if args.port_file:
        Path(args.port_file).write_text(str(server.server_address[1]), encoding="utf-8")
    sys.stdout.flush()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))  # `kill` closes the socket and the worker cleanly
    try:
        server.serve_forever(poll_interval=0.1)
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()


if __name__ == "__main__":
    sys.exit(main())
