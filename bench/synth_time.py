"""Wall time of `npx cdk synth -c env=ENV` for this app against a one-bucket app, through the same CLI.

    python bench/synth_time.py [--pairs 5] [--env dev] [--output bench/synth_time.json]

The naive baseline is the smallest real CDK app: one Python stack with one S3 bucket, run by the same
aws-cdk-lib in the same `.venv-app` through the same `node_modules/.bin/cdk`, from a temp folder. The two
synths alternate (baseline first, then this app, N times), so load from other work on the machine hits both
alike; the ratio of the two medians comes from the same run. CPU seconds (user + system of the whole
process tree) are reported beside wall time: they barely move with load, wall time does. Both write to a
fresh temp `--output` folder, with the same environment (CDK telemetry off, the Node version warning
silenced). Prints JSON.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from stacks.jsii_kernel import kernel_node_options  # noqa: E402

CDK = ROOT / "node_modules" / ".bin" / "cdk"
PYTHON = ROOT / ".venv-app" / "bin" / "python"

ONE_BUCKET_APP = """\
{kernel_option}from aws_cdk import App, Stack, aws_s3 as s3

app = App()
stack = Stack(app, "OneBucket")
s3.Bucket(stack, "Bucket")
app.synth()
"""

ENV = {**os.environ, "CDK_DISABLE_CLI_TELEMETRY": "true"}


# app.py gives the jsii kernel's node options (stacks/jsii_kernel.py); a third arm is the baseline setting them the
# same way, so the ratio is also shown without the part of the speed-up that any app could take.
KERNEL_OPTION_LINES = (
    "import os\nos.environ['NODE_OPTIONS'] = (os.environ.get('NODE_OPTIONS', '') + ' ' + {0!r}).strip()\n"
)


def _kernel_options() -> str:
    """What app.py adds to an empty NODE_OPTIONS."""
    environ: dict = {}
    kernel_node_options(environ)
    return environ["NODE_OPTIONS"]


def write_baseline(folder: Path, kernel_option: str = "") -> None:
    folder.mkdir()
    lines = KERNEL_OPTION_LINES.format(kernel_option) if kernel_option else ""
    (folder / "app.py").write_text(ONE_BUCKET_APP.format(kernel_option=lines), encoding="utf-8")
    cdk_json = {"app": f"{PYTHON} app.py", "versionReporting": False, "notices": False}
    (folder / "cdk.json").write_text(json.dumps(cdk_json), encoding="utf-8")


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def timed_synth(cwd: Path, args: list[str], out: Path) -> tuple[float, float]:
    """Wall and CPU seconds (user + system of the CLI, the app and everything they start) of one `cdk synth`.
    CPU time barely moves with other load on the machine; a failing synth stops the benchmark."""
    argv = [str(CDK), "synth", *args, "--output", str(out)]  # every stack: synth has no --all
    cpu, start = _children_cpu(), time.perf_counter()
    done = subprocess.run(argv, cwd=cwd, env=ENV, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    seconds = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"synth in {cwd} failed ({done.returncode}):\n{done.stderr[-2000:]}")
    return seconds, _children_cpu() - cpu


def measure(pairs: int, env: str) -> dict:
    with tempfile.TemporaryDirectory(prefix="synth-bench-") as tmp:
        work = Path(tmp)
        baseline_dir, tuned_dir = work / "one-bucket", work / "one-bucket-kernel-option"
        write_baseline(baseline_dir)
        write_baseline(tuned_dir, _kernel_options())
        baseline, tuned, app = [], [], []
        for index in range(pairs):
            baseline.append(timed_synth(baseline_dir, [], work / f"base-{index}"))
            tuned.append(timed_synth(tuned_dir, [], work / f"tuned-{index}"))
            app.append(timed_synth(ROOT, ["-c", f"env={env}"], work / f"app-{index}"))
    base_median, tuned_median, app_median = (
        statistics.median(wall for wall, _ in runs) for runs in (baseline, tuned, app)
    )
    base_cpu, app_cpu = (statistics.median(cpu for _, cpu in runs) for runs in (baseline, app))
    return {
        "command": f"npx cdk synth -c env={env}",
        "baseline": "one-bucket Python app, same aws-cdk-lib, .venv-app and CLI",
        "pairs": pairs,
        "one_bucket_seconds": [round(wall, 2) for wall, _ in baseline],
        "app_seconds": [round(wall, 2) for wall, _ in app],
        "one_bucket_median_s": round(base_median, 2),
        "app_median_s": round(app_median, 2),
        "ratio_of_medians": round(app_median / base_median, 2),
        "pair_ratios": [round(a[0] / b[0], 2) for a, b in zip(app, baseline, strict=True)],
        "one_bucket_cpu_median_s": round(base_cpu, 2),
        "app_cpu_median_s": round(app_cpu, 2),
        "cpu_ratio_of_medians": round(app_cpu / base_cpu, 2),
        "one_bucket_with_kernel_option_seconds": [round(wall, 2) for wall, _ in tuned],
        "one_bucket_with_kernel_option_median_s": round(tuned_median, 2),
        "ratio_to_one_bucket_with_kernel_option": round(app_median / tuned_median, 2),
        "load_average_1m_at_end": round(os.getloadavg()[0], 2),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=5)
    parser.add_argument("--env", default="dev")
    parser.add_argument("--output", type=Path, help="also write the JSON here")
    args = parser.parse_args(argv)
    result = json.dumps(measure(args.pairs, args.env), indent=2)
    print(result)
    if args.output:
        args.output.write_text(result + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
