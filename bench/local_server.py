"""Throughput and p50/p95 latency of local/servers/llm_endpoint at 1, 4 and 16 concurrent clients, batched vs not.

    python bench/local_server.py [--model-dir DIR] [--max-batch 4] [--clients 1,4,16] [--requests-per-client 6]

Starts two servers on loopback from the same model folder: unbatched (option.max_rolling_batch_size=1) and
batched (--max-batch). Without --model-dir it builds the tiny random-init Llama of training_code/qlora/finetune/tiny.py.
Each cell is a closed loop: every client sends its next request when the previous one is answered. The two
servers take turns in short rounds, so load from anything else on the machine hits both alike; the ratios
(batched / unbatched) come from the same run. Prints a markdown table; --output writes it to a file too.
"""

from __future__ import annotations

import argparse
import http.client
import json
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "data" / "instructions.jsonl"


def build_model(out: Path, hidden: int, layers: int) -> Path:
    sys.path.insert(0, str(ROOT / "training_code" / "qlora"))
    from finetune.tiny import build_tiny_llama

    texts = [v for line in DATA.read_text(encoding="utf-8").splitlines() for v in json.loads(line).values()]
    return build_tiny_llama(out, texts, hidden_size=hidden, intermediate_size=hidden * 2, num_layers=layers)


class Server:
    def __init__(self, model_dir: Path, max_batch: int, work: Path, threads: int):
        self.port_file = work / f"port-{max_batch}"
        argv = [sys.executable, str(ROOT / "local" / "servers" / "llm_endpoint"), "--model-dir", str(model_dir)]
        argv += ["--set", f"option.max_rolling_batch_size={max_batch}"]
        argv += ["--port", "0", "--port-file", str(self.port_file)]
        argv += ["--threads", str(threads)] if threads else []
        self.log = (work / f"server-{max_batch}.log").open("w")
        self.process = subprocess.Popen(argv, cwd=ROOT, stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 300
        while not (self.port_file.is_file() and self.port_file.read_text().strip()):
            if self.process.poll() is not None or time.monotonic() > deadline:
                raise SystemExit(f"server with max batch {max_batch} did not start; see {self.log.name}")
            time.sleep(0.2)
        self.port = int(self.port_file.read_text())

    def cpu_seconds(self) -> float:
        """User + system CPU time of the server process so far (load on the machine barely changes it)."""
        times = psutil.Process(self.process.pid).cpu_times()
        return times.user + times.system

    def close(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(timeout=15)
        self.log.close()


def run_cell(port: int, clients: int, requests_per_client: int, body: dict) -> tuple[float, list[float], int]:
    """Wall seconds, every request's latency, and generated tokens, for `clients` closed-loop clients."""
    latencies: list[float] = []
    tokens = [0]
    errors: list[str] = []
    lock = threading.Lock()
    payload = json.dumps(body).encode()
    start = threading.Barrier(clients + 1)

    def client() -> None:
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=300)
        start.wait()
        for _ in range(requests_per_client):
            sent = time.perf_counter()
            connection.request("POST", "/invocations", payload, {"Content-Type": "application/json"})
            response = connection.getresponse()
            answer = json.loads(response.read())
            elapsed = time.perf_counter() - sent
            with lock:
                if response.status != 200:
                    errors.append(str(answer))
                latencies.append(elapsed)
                tokens[0] += answer.get("details", {}).get("generated_tokens", 0) if response.status == 200 else 0
        connection.close()

    threads = [threading.Thread(target=client) for _ in range(clients)]
    for thread in threads:
        thread.start()
    start.wait()
    began = time.perf_counter()
    for thread in threads:
        thread.join(timeout=600)
    wall = time.perf_counter() - began
    if errors:
        raise SystemExit(f"{len(errors)} requests failed, e.g. {errors[0]}")
    return wall, latencies, tokens[0]


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))]


def main(argv: list[str] | None = None) -> str:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model-dir", help="merged model folder; default: build a tiny random-init Llama")
    parser.add_argument("--hidden", type=int, default=64, help="hidden size of the built model")
    parser.add_argument("--layers", type=int, default=2, help="layers of the built model")
    parser.add_argument("--max-batch", type=int, default=4, help="max_rolling_batch_size of the batched server")
    parser.add_argument("--clients", default="1,4,16")
    parser.add_argument("--requests-per-client", type=int, default=6, help="per client per cell, split over rounds")
    parser.add_argument("--rounds", type=int, default=2, help="alternating rounds per server and client count")
    parser.add_argument("--max-new-tokens", type=int, default=32)
    parser.add_argument("--threads", type=int, default=1, help="torch threads per server (0: torch's default)")
    parser.add_argument("--output", help="also write the markdown table here")
    args = parser.parse_args(argv)
    clients_list = [int(c) for c in args.clients.split(",")]
    prompt = "<s>[INST] <<SYS>>\nAs a data scientist\n<</SYS>>\nWhat is a machine learning? [/INST]"
    body = {"inputs": prompt, "parameters": {"max_new_tokens": args.max_new_tokens, "details": True}}

    with tempfile.TemporaryDirectory(prefix="bench-local-server-") as tmp:
        work = Path(tmp)
        model_dir = Path(args.model_dir) if args.model_dir else build_model(work / "model", args.hidden, args.layers)
        servers = {batch: Server(model_dir, batch, work, args.threads) for batch in (1, args.max_batch)}
        try:
            for server in servers.values():  # warm-up: first-call costs out of the figures
                run_cell(server.port, 2, 2, body)
            results: dict[tuple[int, int], dict] = {}
            per_round = max(1, args.requests_per_client // args.rounds)
            for clients in clients_list:
                for _ in range(args.rounds):
                    for batch, server in servers.items():
                        cpu = server.cpu_seconds()
                        wall, latencies, tokens = run_cell(server.port, clients, per_round, body)
                        cell = results.setdefault(
                            (batch, clients), {"wall": 0.0, "cpu": 0.0, "latencies": [], "tokens": 0}
                        )
                        cell["cpu"] += server.cpu_seconds() - cpu
                        cell["wall"] += wall
                        cell["latencies"] += latencies
                        cell["tokens"] += tokens
                print(f"clients {clients}: done", file=sys.stderr, flush=True)
        finally:
            for server in servers.values():
                server.close()

    rows = [
        "| clients | max batch | requests | req/s | tokens/s | p50 latency (s) | p95 latency (s) | CPU ms/request |",
        "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    ratios = ["| clients | throughput batched / unbatched | p50 batched / unbatched | p95 batched / unbatched "
              "| CPU per request batched / unbatched |",
              "| ---: | ---: | ---: | ---: | ---: |"]  # fmt: skip
    for clients in clients_list:
        figures = {}
        for batch in servers:
            cell = results[(batch, clients)]
            n = len(cell["latencies"])
            figures[batch] = (
                n / cell["wall"],
                percentile(cell["latencies"], 0.5),
                percentile(cell["latencies"], 0.95),
                cell["cpu"] / n,
            )
            rows.append(
                f"| {clients} | {batch} | {n} | {figures[batch][0]:.2f} | {cell['tokens'] / cell['wall']:.1f} "
                f"| {figures[batch][1]:.3f} | {figures[batch][2]:.3f} | {figures[batch][3] * 1000:.0f} |"
            )
        (t1, p50_1, p95_1, c1), (tb, p50_b, p95_b, cb) = figures[1], figures[args.max_batch]
        ratios.append(f"| {clients} | {tb / t1:.2f}x | {p50_b / p50_1:.2f}x | {p95_b / p95_1:.2f}x | {cb / c1:.2f}x |")
    table = "\n".join(rows) + "\n\n" + "\n".join(ratios) + "\n"
    print(table)
    if args.output:
        Path(args.output).write_text(table, encoding="utf-8")
    return table


if __name__ == "__main__":
    main()
