"""Serve a model folder in-process with local/servers/llm_endpoint, as the fixtures and the tests that need a server
of their own do."""

from __future__ import annotations

from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
MAX_BATCH = 4
N_POSITIONS = 128
SERVED_NAME = "tiny-chat"


@contextmanager
def serving(model_dir: Path, **kwargs):
    """local/servers/llm_endpoint in a background thread on a free port, on one torch thread, closed afterwards."""
    import torch

    from local.servers.llm_endpoint import Settings, start

    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # the other xdist worker has the other core
    server, thread = start(model_dir, Settings(max_batch=MAX_BATCH, n_positions=N_POSITIONS), **kwargs)
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)
        torch.set_num_threads(threads)  # the worker process runs other teams' tests next
