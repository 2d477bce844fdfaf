"""Response time (p50/p95) against users for load-test runs from Locust's CSVs, and the knee of each.

    python loadtest/plot.py --run base=build/loadtest/base --run pruned=build/loadtest/pruned --slo-ms 200 \\
        --output build/loadtest/loadtest.png

Each ``--run NAME=PREFIX`` reads ``PREFIX_stats_history.csv``. A step of the stepped shape is summarised by
its last history row (Locust's current percentiles cover the last 10 s, so steps should last longer than
that). The knee is the user count of the first step whose p95 is above the SLO or that had failures;
``None`` means the run never degraded (its knee lies above the highest step). With two runs the ratio is
knee(second) / knee(first).
"""

from __future__ import annotations

import argparse
import csv
import json
import sys
from pathlib import Path


def read_steps(history_csv: str | Path) -> list[dict]:
    """[{users, p50, p95, rps, requests, failures}] per user-count step, in run order."""
    last: dict[int, dict] = {}
    with open(history_csv, newline="") as handle:
        for row in csv.DictReader(handle):
            if row.get("Name") != "Aggregated":
                continue
            users = int(row["User Count"])
            if users == 0 or row["50%"] in ("N/A", "") or row["95%"] in ("N/A", ""):
                continue
            last[users] = row
    steps, failures_before = [], 0
    for users, row in last.items():
        total_failures = int(row["Total Failure Count"])
        steps.append(
            {
                "users": users,
                "p50_ms": float(row["50%"]),
                "p95_ms": float(row["95%"]),
                "rps": float(row["Requests/s"]),
                "requests": int(row["Total Request Count"]),
                "failures": total_failures - failures_before,
            }
        )
        failures_before = total_failures
    return steps


def knee(steps: list[dict], slo_ms: float) -> int | None:
    for step in steps:
        if step["p95_ms"] > slo_ms or step["failures"] > 0:
            return step["users"]
    return None


def summarise(runs: dict[str, list[dict]], slo_ms: float) -> dict:
    summary: dict = {"slo_ms": slo_ms, "runs": {}}
    for name, steps in runs.items():
        summary["runs"][name] = {
            "knee_users": knee(steps, slo_ms),
            "max_users": max((s["users"] for s in steps), default=0),
            "steps": steps,
        }
    names = list(runs)
    if len(names) == 2:
        first, second = (summary["runs"][n] for n in names)
        if first["knee_users"] and second["knee_users"]:
            summary["knee_ratio"] = second["knee_users"] / first["knee_users"]
        elif first["knee_users"] and second["knee_users"] is None:
            summary["knee_ratio_at_least"] = second["max_users"] / first["knee_users"]
    return summary


def plot(runs: dict[str, list[dict]], summary: dict, output: str | Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7.5, 4.5))
    for index, (name, steps) in enumerate(runs.items()):
        color = f"C{index}"
        users = [s["users"] for s in steps]
        ax.plot(users, [s["p95_ms"] for s in steps], "-o", color=color, markersize=3, label=f"{name} p95")
        ax.plot(users, [s["p50_ms"] for s in steps], "--", color=color, alpha=0.7, label=f"{name} p50")
        at = summary["runs"][name]["knee_users"]
        if at is not None:
            ax.axvline(at, color=color, linestyle=":", alpha=0.8)
            ax.annotate(
                f"knee {name}: {at}",
                (at, ax.get_ylim()[1] * 0.9),
                color=color,
                rotation=90,
                ha="right",
                va="top",
                fontsize=8,
            )
    ax.axhline(summary["slo_ms"], color="tab:red", linewidth=1, label=f"SLO p95 {summary['slo_ms']:g} ms")
    ax.set_xlabel("users")
    ax.set_ylabel("response time (ms)")
    ax.set_yscale("log")
    ax.set_title("Response time against users")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    output = Path(output)
    output.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(output, dpi=120)
    plt.close(fig)
    return output


def markdown(summary: dict) -> str:
    lines = ["| run | knee (users) | highest step | p50 / p95 at the first step (ms) |", "| --- | ---: | ---: | ---: |"]
    for name, run in summary["runs"].items():
        first = run["steps"][0] if run["steps"] else {"p50_ms": float("nan"), "p95_ms": float("nan")}
        knee_text = run["knee_users"] if run["knee_users"] is not None else f"> {run['max_users']}"
        lines.append(f"| {name} | {knee_text} | {run['max_users']} | {first['p50_ms']:.0f} / {first['p95_ms']:.0f} |")
    if "knee_ratio" in summary:
        lines.append(f"\nknee ratio (second / first): {summary['knee_ratio']:.2f}")
    elif "knee_ratio_at_least" in summary:
        lines.append(f"\nknee ratio (second / first): at least {summary['knee_ratio_at_least']:.2f}")
    return "\n".join(lines)


def parse_run(text: str) -> tuple[str, str]:
    name, sep, prefix = text.partition("=")
    if not sep or not name or not prefix:
        raise argparse.ArgumentTypeError(f"expected NAME=CSV_PREFIX, got {text!r}")
    return name, prefix


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--run", type=parse_run, action="append", required=True, help="NAME=CSV_PREFIX")
    parser.add_argument("--slo-ms", type=float, default=200.0, help="p95 response-time SLO")
    parser.add_argument("--output", default="build/loadtest/loadtest.png")
    args = parser.parse_args(argv)
    runs = {name: read_steps(f"{prefix}_stats_history.csv") for name, prefix in args.run}
    summary = summarise(runs, args.slo_ms)
    summary["plot"] = str(plot(runs, summary, args.output))
    Path(args.output).with_suffix(".json").write_text(json.dumps(summary, indent=2))
    print(markdown(summary), flush=True)
    print(f"plot: {summary['plot']}", flush=True)
    return summary


if __name__ == "__main__":
    main()
    sys.exit(0)
