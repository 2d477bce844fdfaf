"""The hooks `generate` calls per step, so each row of a batch keeps its own stop rules and its own stream.

Imported when a batch runs, not with the package: transformers loads with the model, never for a --help.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from transformers import StoppingCriteria

from local.servers.llm_endpoint.request import Job


@dataclass
class Rows:
    """One batch as the hooks see it: the jobs, the padded prompt width and each row's generated ids so far."""

    engine: Any  # the Engine: its _update decides a row's end, its decode gives the text a client sees
    jobs: list[Job]
    width: int
    ids: list[list[int]] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.ids = [[] for _ in self.jobs]


class PerRowStop(StoppingCriteria):
    """Each row's own max_new_tokens, stop sequences and EOS; runs before the streamer sees a step."""

    def __init__(self, rows: Rows):
        self.rows = rows

    def __call__(self, ids, scores, **kwargs):
        import torch

        rows = self.rows
        for row, job in enumerate(rows.jobs):
            if job.finished_at is None:
                rows.ids[row] = ids[row, rows.width :].tolist()
                rows.engine._update(job, rows.ids[row])
        return torch.tensor([job.finished_at is not None for job in rows.jobs], device=ids.device)


class RowStreamer:
    """Sends each streaming row its tokens; generate calls put() with the prompt first, then per step."""

    def __init__(self, rows: Rows):
        self.rows = rows
        self.prompt_seen = False
        self.sent = [0] * len(rows.jobs)

    def put(self, value) -> None:
        if not self.prompt_seen:
            self.prompt_seen = True
            return
        for row, job in enumerate(self.rows.jobs):
            limit = job.finished_at if job.finished_at is not None else job.generated
            if job.stream is not None and self.sent[row] < limit:
                self._send_next(row, job)

    def _send_next(self, row: int, job: Job) -> None:
        """The row's next token, with the text it adds (none while a multi-byte character is half decoded)."""
        engine, ids = self.rows.engine, self.rows.ids[row]
        self.sent[row] += 1
        token_id = ids[self.sent[row] - 1]
        text = engine.decode(ids[: self.sent[row]])
        piece = ""
        if not text.endswith("\ufffd"):  # else half of a multi-byte character: wait for the rest
            piece, job.streamed_text = text[len(job.streamed_text) :], text
        job.stream.put({"token": {"id": token_id, "text": piece, "special": token_id == engine.eos_id}})

    def end(self) -> None:
        pass
