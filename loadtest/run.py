"""Stepped Locust load test against one or more targets, interleaved in rounds, then the comparison plot.

    python loadtest/run.py --target base=http://127.0.0.1:8081 --target pruned=http://127.0.0.1:8082
    python loadtest/run.py --target pruned=sagemaker:<endpoint name>     # a real endpoint, your AWS credentials
    make loadtest TARGET="base=http://127.0.0.1:8081 pruned=http://127.0.0.1:8082" [LOADTEST_ARGS=...]

For each target Locust runs headless with loadtest/locustfile.py's StepShape (--step-users, 2x --step-users,
... up to --max-users, --step-seconds each step) and writes <out>/<name>_stats.csv, _stats_history.csv and
_failures.csv; then loadtest/plot.py draws p50/p95 against users and reports each knee (p95 above --slo-ms,
or failures). With --rounds R > 1 the targets alternate as whole runs with the same steps, reversing the
order every round (A B, B A, A B, ...: a drift in machine load hits both alike); the files are then named
<name>_r<k>, and each target's knee is the median over its rounds.
HTTP targets must be loopback; every run is bounded (users, seconds, and a hard timeout).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import urlparse

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import plot  # noqa: E402

LOCUSTFILE = HERE / "locustfile.py"
LOOPBACK = {"127.0.0.1", "localhost", "::1"}
MAX_USERS = 512
MAX_STEP_SECONDS = 300


def parse_target(text: str) -> tuple[str, str]:
    """NAME=URL or NAME=sagemaker:ENDPOINT; a bare URL is named 'target'."""
    name, sep, where = text.partition("=")
    if not sep:
        name, where = "target", text
    if where.startswith("sagemaker:") and len(where) > len("sagemaker:"):
        return name, where
    if where.startswith("http://") or where.startswith("https://"):
        if urlparse(where).hostname not in LOOPBACK:  # the same rule as locustfile.check_loopback
            raise argparse.ArgumentTypeError(f"TARGET {text!r}: local load tests only target loopback (127.0.0.1)")
        return name, where
    raise argparse.ArgumentTypeError(
        f"TARGET {text!r}: expected NAME=http://127.0.0.1:PORT (a local server) or NAME=sagemaker:ENDPOINT_NAME"
    )


def locust_command(name: str, where: str, out: Path) -> tuple[list[str], dict[str, str]]:
    command = [
        sys.executable,
        "-m",
        "locust",
        "-f",
        str(LOCUSTFILE),
        "--headless",
        "--csv",
        str(out / name),
        "--only-summary",
        "--loglevel",
        "WARNING",
        "--exit-code-on-error",
        "0",
    ]
    env = {}
    if where.startswith("sagemaker:"):
        env["LOADTEST_ENDPOINT"] = where.removeprefix("sagemaker:")
        command.append("SageMakerUser")
    else:
        command += ["--host", where, "LocalHttpUser"]
    return command, env


def run_order(names: list[str], rounds: int) -> list[tuple[str, str]]:
    """(target, run name) in the order they run: ABBA... so that neither target always goes first."""
    order = []
    for k in range(rounds):
        for name in names if k % 2 == 0 else list(reversed(names)):
            order.append((name, name if rounds == 1 else f"{name}_r{k + 1}"))
    return order


def median(values: list[float]) -> float:
    ordered = sorted(values)
    middle = len(ordered) // 2
    return ordered[middle] if len(ordered) % 2 else (ordered[middle - 1] + ordered[middle]) / 2


def combine_rounds(summary: dict, order: list[tuple[str, str]]) -> dict:
    """Per target: the knee of each round and their median; a run that never degraded counts as its
    highest step (so the median is then a lower bound, flagged ``at_least``)."""
    targets: dict[str, dict] = {}
    for name, run_name in order:
        run = summary["runs"][run_name]
        entry = targets.setdefault(name, {"knees": [], "at_least": False})
        entry["knees"].append(run["knee_users"] if run["knee_users"] is not None else run["max_users"])
        entry["at_least"] |= run["knee_users"] is None
    for entry in targets.values():
        entry["median_knee"] = median(entry["knees"])
    return targets


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--target", type=parse_target, action="append", required=True)
    parser.add_argument("--out", default="build/loadtest")
    parser.add_argument("--step-users", type=int, default=2)
    parser.add_argument("--step-seconds", type=int, default=15, help="> 10: Locust's percentiles cover 10 s")
    parser.add_argument("--max-users", type=int, default=40)
    parser.add_argument("--rounds", type=int, default=1, help="whole runs per target, alternating ABBA")
    parser.add_argument(
        "--settle-seconds",
        type=float,
        default=15.0,
        help="idle time before every run but the first, so the last run's backlog drains before the next starts",
    )
    parser.add_argument("--user-rps", type=float, default=1.0, help="requests per second per user (at most)")
    parser.add_argument("--pairs", type=int, default=1, help="sentence pairs per request")
    parser.add_argument("--data", default=None, help="jsonl with sentence1/sentence2 (default: NAS sample test set)")
    parser.add_argument("--slo-ms", type=float, default=200.0)
    parser.add_argument(
        "--stop-factor", type=float, default=0, help="end a run after a step with p95 above this x SLO (0: off)"
    )
    args = parser.parse_args(argv)
    if not 1 <= args.max_users <= MAX_USERS or not 1 <= args.step_seconds <= MAX_STEP_SECONDS:
        parser.error(f"--max-users must be 1..{MAX_USERS} and --step-seconds 1..{MAX_STEP_SECONDS}")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    steps = -(-args.max_users // args.step_users)
    shape = {
        "LOADTEST_STEP_USERS": str(args.step_users),
        "LOADTEST_STEP_SECONDS": str(args.step_seconds),
        "LOADTEST_MAX_USERS": str(args.max_users),
        "LOADTEST_USER_RPS": str(args.user_rps),
        "LOADTEST_PAIRS": str(args.pairs),
        "LOADTEST_STOP_P95_MS": str(args.stop_factor * args.slo_ms),
        **({"LOADTEST_DATA": str(Path(args.data).resolve())} if args.data else {}),
    }
    where_of = dict(args.target)
    order = run_order([name for name, _ in args.target], args.rounds)
    for index, (name, run_name) in enumerate(order):
        if index:
            time.sleep(args.settle_seconds)
        command, extra = locust_command(run_name, where_of[name], out)
        where = where_of[name]
        print(f"[{run_name}] {where}: {steps} steps of {args.step_seconds} s up to {args.max_users} users", flush=True)
        subprocess.run(
            command, env={**os.environ, **shape, **extra}, check=True, timeout=steps * args.step_seconds + 120
        )
        for suffix in ("_stats.csv", "_stats_history.csv", "_failures.csv"):
            if not (out / f"{run_name}{suffix}").exists():
                raise SystemExit(f"locust wrote no {run_name}{suffix}")
    runs = [f"{run_name}={out / run_name}" for _, run_name in order]
    summary = plot.main(
        [arg for run in runs for arg in ("--run", run)]
        + ["--slo-ms", str(args.slo_ms), "--output", str(out / "loadtest.png")]
    )
    summary["order"] = [run_name for _, run_name in order]
    summary["targets"] = combine_rounds(summary, order)
    return summary


if __name__ == "__main__":
    main()
