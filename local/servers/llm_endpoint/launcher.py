"""The command line: serve a model folder with the contract of any backend in stacks/serving/backends/.

The stand-in (this package) serves the backend whose record names it as its local server; every other backend
runs the local server its record names (`serve_cli(args)`), so a new backend needs no edit here.
"""

from __future__ import annotations

import argparse
import logging
import signal
import sys
import time
from pathlib import Path

from local.servers.llm_endpoint.engine import Engine
from local.servers.llm_endpoint.http_server import LocalEndpointServer
from local.servers.llm_endpoint.settings import load_settings
from stacks.serving.backends import backend, backends

LOG = logging.getLogger("local_endpoint")
STAND_IN = "local.servers.llm_endpoint"  # this package: the local server a backend record may name
STAND_IN_FLAGS = ("properties", "set")  # serving.properties settings, read only by the stand-in
SERVER_FLAGS = ("served_model_name", "batch_size", "sequence_length", "tensor_parallel_size")


def stand_in_backends() -> tuple[str, ...]:
    """The backends whose contract this package serves itself (the default is the first)."""
    return tuple(name for name, record in backends().items() if record.local_server == STAND_IN)


def other_backends() -> tuple[str, ...]:
    """The backends served by a local server of their own (e.g. real vLLM)."""
    return tuple(name for name, record in backends().items() if record.local_server != STAND_IN)


def check_flags(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """The stand-in's settings come from serving.properties; another server's from its own flags."""
    stand_ins, others = stand_in_backends(), other_backends()
    if args.backend in stand_ins and any(getattr(args, name) for name in SERVER_FLAGS):
        parser.error(
            "--batch-size, --sequence-length, --tensor-parallel-size and --served-model-name are "
            f"{' or '.join(others)} settings"
        )
    if args.backend in others and any(getattr(args, name) for name in STAND_IN_FLAGS):
        parser.error(
            f"--properties and --set are {' or '.join(stand_ins)} (LMI settings); "
            f"{args.backend} takes --batch-size and --sequence-length"
        )


def build_parser() -> argparse.ArgumentParser:
    """Every backend's flags in one parser, so one command line starts any of them."""
    parser = argparse.ArgumentParser(
        prog="llm_endpoint", description=(sys.modules[__package__].__doc__ or "").splitlines()[0]
    )
    parser.add_argument("--model-dir", required=True, help="merged Hugging Face model folder (with tokenizer)")
    parser.add_argument("--properties", help="serving.properties (rendered, or a template: {{...}} means unset)")
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override a property, e.g. option.max_rolling_batch_size=1",
    )
    default = stand_in_backends()[0]
    parser.add_argument("--backend", choices=tuple(backends()), default=default, help="whose HTTP contract to serve")
    parser.add_argument("--served-model-name", help="the `model` requests name (SM_ON_SERVED_MODEL_NAME)")
    parser.add_argument("--batch-size", type=int, help="requests decoded together (SM_ON_BATCH_SIZE)")
    parser.add_argument("--sequence-length", type=int, help="prompt + max_tokens (SM_ON_SEQUENCE_LENGTH)")
    parser.add_argument("--tensor-parallel-size", type=int, help="SM_ON_TENSOR_PARALLEL_SIZE (1 here)")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8080, help="0 picks a free port")
    parser.add_argument("--port-file", help="write the bound port here once /ping answers")
    parser.add_argument("--batch-window-ms", type=float, default=5.0, help="wait for companions of a first request")
    parser.add_argument("--threads", type=int, default=0, help="torch CPU threads (0: torch's default)")
    parser.add_argument("-v", "--verbose", action="store_true")
    return parser


def main(argv: list[str] | None = None) -> int | None:
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.INFO, format="%(asctime)s %(message)s")
    check_flags(parser, args)
    record = backend(args.backend)
    if record.local_server != STAND_IN:  # another container's contract: its own local server, in the foreground
        return record.local_server_module().serve_cli(args)
    serve_stand_in(args)
    return None


def serve_stand_in(args: argparse.Namespace) -> None:
    """Load the model, serve in the foreground until SIGTERM or Ctrl-C, then close the socket and the worker."""
    settings = load_settings(args.properties, args.set, batch_window_s=args.batch_window_ms / 1000)
    if args.threads:
        import torch

        torch.set_num_threads(args.threads)
    loaded = time.perf_counter()
    server = LocalEndpointServer((args.host, args.port), Engine(args.model_dir, settings), settings)
    LOG.info(
        "model loaded in %.1f s; %s contract; max batch %d, n_positions %d, dtype %s; listening on %s",
        time.perf_counter() - loaded,
        args.backend,
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
