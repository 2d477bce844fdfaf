"""The model: a causal LM and its tokenizer, decoding one batch of jobs with a single `generate`."""

from __future__ import annotations

import logging
import threading
from pathlib import Path
from typing import Any

from local.servers.llm_endpoint.request import Job
from local.servers.llm_endpoint.settings import DTYPES, Settings

LOG = logging.getLogger("local_endpoint")


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
        """Decode the batch with one `generate`; each job gets its own result, cut where its row finished."""
        from transformers import StoppingCriteriaList

        from local.servers.llm_endpoint.decoding import PerRowStop, Rows, RowStreamer

        torch = self.torch
        input_ids, attention_mask = self._left_padded(jobs)
        rows = Rows(self, jobs, input_ids.shape[1])
        seed = jobs[0].sampling.seed
        if seed is not None:
            torch.manual_seed(seed)
        streaming = any(job.stream is not None for job in jobs)
        with torch.inference_mode():
            output = self.model.generate(
                input_ids=input_ids.to(self.device),
                attention_mask=attention_mask.to(self.device),
                generation_config=self._generation_config(jobs),
                stopping_criteria=StoppingCriteriaList([PerRowStop(rows)]),
                streamer=RowStreamer(rows) if streaming else None,
            )
        for row, job in enumerate(jobs):
            new_ids = output[row, rows.width :].tolist()
            end = job.finished_at if job.finished_at is not None else min(len(new_ids), job.max_new_tokens)
            job.result = self._result(job, new_ids[:end])

    def _left_padded(self, jobs: list[Job]) -> tuple[Any, Any]:
        """Input ids and attention mask, left-padded so every prompt ends where generation starts."""
        torch = self.torch
        width = max(len(job.input_ids) for job in jobs)
        input_ids = torch.full((len(jobs), width), self.pad_id, dtype=torch.long)
        attention_mask = torch.zeros((len(jobs), width), dtype=torch.long)
        for row, job in enumerate(jobs):
            input_ids[row, width - len(job.input_ids) :] = torch.tensor(job.input_ids)
            attention_mask[row, width - len(job.input_ids) :] = 1
        return input_ids, attention_mask

    def _generation_config(self, jobs: list[Job]) -> Any:
        """The batch's shared sampling settings; the longest max_new_tokens, rows stop on their own."""
        from transformers import GenerationConfig

        s = jobs[0].sampling
        return GenerationConfig(
            max_new_tokens=max(job.max_new_tokens for job in jobs),
            do_sample=s.do_sample,
            repetition_penalty=s.repetition_penalty,
            pad_token_id=self.pad_id,
            eos_token_id=self.eos_id,
            bos_token_id=self.bos_id,
            **({"temperature": s.temperature, "top_p": s.top_p, "top_k": s.top_k} if s.do_sample else {}),
        )

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
