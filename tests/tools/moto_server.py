"""moto's server on a free loopback port, for a tool run in its own process against it (--endpoint-url)."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def loopback_moto_server() -> Iterator[str]:
    """The server's URL while it runs: real AWS APIs (STS, S3, CloudFormation, ...) for boto3 in another process."""
    from moto.server import ThreadedMotoServer

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.stop()
