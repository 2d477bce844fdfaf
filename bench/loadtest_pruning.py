"""Benchmark: stepped Locust load test of the base and the pruned MiniLM, each behind the local encoder server.

1. export both models the way the pruning stack's export job does (training_code/nas/export_models.py: the
   pruned pick from the Pareto front, and the unpruned full network through the same export code);
2. serve each with local/servers/encoder_endpoint.py (one worker, one torch thread, 127.0.0.1, separate processes);
3. run loadtest/run.py against both in one run, interleaved: --rounds whole runs per model alternating
   ABBA (base, pruned, pruned, base, ...; the same steps, SLO and payloads), and report each model's median
   knee and their ratio (pruned / base).

Needs bench/nas_pruning.py's work folder (super-network and search results):

    HF_HUB_OFFLINE=1 .venv/bin/python bench/nas_pruning.py --work-dir /tmp/nas_bench
    .venv/bin/python bench/loadtest_pruning.py --nas-work-dir /tmp/nas_bench --out /tmp/loadtest_bench
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
NAS_DIR = REPO / "training_code" / "nas"
os.environ.setdefault("HF_HUB_OFFLINE", "1")


def free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def start_server(model_dir: Path, log: Path) -> tuple[subprocess.Popen, str]:
    port = free_port()
    process = subprocess.Popen(
        [
            sys.executable,
            str(REPO / "local" / "servers" / "encoder_endpoint.py"),
            "--model-dir",
            str(model_dir),
            "--port",
            str(port),
            "--workers",
            "1",
            "--threads",
            "1",
        ],
        stdout=log.open("w"),
        stderr=subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.time() + 300
    while time.time() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"server for {model_dir} exited; see {log}")
        try:
            with urllib.request.urlopen(f"{url}/ping", timeout=2):
                return process, url
        except OSError:
            time.sleep(1)
    process.terminate()
    raise TimeoutError(f"server for {model_dir} did not answer /ping")


def export(nas_work: Path, out: Path, args) -> tuple[Path, Path]:
    sys.path.insert(0, str(NAS_DIR))
    import export_models

    base, pruned = out / "base", out / "pruned"
    if not (base / "config.json").exists() or not (pruned / "config.json").exists():
        shutil.rmtree(base, ignore_errors=True)
        shutil.rmtree(pruned, ignore_errors=True)
        export_models.main(
            [
                "--model-dir",
                str(nas_work / "supernet"),
                "--pareto-file",
                str(nas_work / "search" / "pareto.json"),
                "--max-error-increase",
                str(args.max_error_increase),
                "--minimise",
                args.minimise,
                "--output-dir",
                str(pruned),
                "--base-output-dir",
                str(base),
                "--inference-code-dir",
                str(REPO / "serving_artifacts" / "encoder_classifier" / "code"),
            ]
        )
    return base, pruned


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nas-work-dir", default="/tmp/nas_bench")
    parser.add_argument("--out", default="/tmp/loadtest_bench")
    parser.add_argument("--max-error-increase", type=float, default=0.01)
    parser.add_argument(
        "--minimise", default="latency_ms", choices=("latency_ms", "num_parameters", "macs", "latency_ms_final")
    )
    parser.add_argument("--step-users", type=int, default=2)
    parser.add_argument("--step-seconds", type=int, default=12)
    parser.add_argument("--max-users", type=int, default=48)
    parser.add_argument("--user-rps", type=float, default=1.0)
    parser.add_argument("--slo-ms", type=float, default=500.0)
    parser.add_argument("--stop-factor", type=float, default=4.0, help="end a run well past its knee")
    parser.add_argument("--rounds", type=int, default=2, help="whole runs per model, alternating ABBA")
    parser.add_argument("--pruned-first", action="store_true", help="start the alternation with the pruned model")
    args = parser.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    base, pruned = export(Path(args.nas_work_dir), out, args)

    sys.path.insert(0, str(REPO / "loadtest"))
    import run as loadtest

    servers = {}
    try:
        for name, folder in (("base", base), ("pruned", pruned)):
            servers[name] = start_server(folder, out / f"{name}-server.log")
        order = ("pruned", "base") if args.pruned_first else ("base", "pruned")
        summary = loadtest.main(
            [
                *(arg for name in order for arg in ("--target", f"{name}={servers[name][1]}")),
                "--out",
                str(out / "locust"),
                "--step-users",
                str(args.step_users),
                "--step-seconds",
                str(args.step_seconds),
                "--max-users",
                str(args.max_users),
                "--user-rps",
                str(args.user_rps),
                "--slo-ms",
                str(args.slo_ms),
                "--stop-factor",
                str(args.stop_factor),
                "--rounds",
                str(args.rounds),
            ]
        )
    finally:
        for process, _ in servers.values():
            process.terminate()
            process.wait(timeout=30)
    exported = {
        name: json.loads((folder / "nas_export.json").read_text())
        for name, folder in (("base", base), ("pruned", pruned))
    }
    summary["models"] = {
        name: {k: meta.get(k) for k in ("num_parameters", "subnet", "validation_error", "max_length")}
        for name, meta in exported.items()
    }
    targets = summary["targets"]
    ratio = targets["pruned"]["median_knee"] / targets["base"]["median_knee"]
    summary["pruned_over_base"] = (">= " if targets["pruned"]["at_least"] else "") + f"{ratio:.2f}"
    summary["settings"] = vars(args)
    summary["load_average"] = os.getloadavg()
    (out / "report.json").write_text(json.dumps(summary, indent=2))
    print(json.dumps({k: summary.get(k) for k in ("pruned_over_base", "load_average")}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
