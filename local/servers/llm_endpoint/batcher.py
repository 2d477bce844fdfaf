"""The batcher: concurrent requests share one queue and one worker, so compatible ones decode together."""

from __future__ import annotations

import logging
import threading
import time
from collections import deque

from local.servers.llm_endpoint.engine import Engine
from local.servers.llm_endpoint.request import Job
from local.servers.llm_endpoint.settings import Settings

LOG = logging.getLogger("local_endpoint")


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
