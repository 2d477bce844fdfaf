"""make eval-data (`python -m tools.eval_data`): an lm-eval task's splits staged as files the benchmark job reads
without a hub. The task is lm-eval's own arc_easy definition; its dataset is an ARC-shaped repository (parquet
per split, the configs in its README, as allenai/ai2_arc is laid out) on the loopback hub or in a local folder.
Expected values come from the repository's rows and from lm-eval building the staged task."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from stacks.paths import QLORA_CODE
from tests.synth import ROOT
from tests.tools.hub_server import Repo, serve

REPO = "allenai/ai2_arc"
SHA = "210d026faf9955653af8916fad021475a3f00453"
SPLITS = {"train": 6, "validation": 4, "test": 10}
README = """---
configs:
- config_name: ARC-Easy
  data_files:
""" + "".join(f"  - split: {s}\n    path: ARC-Easy/{s}-00000-of-00001.parquet\n" for s in SPLITS)
README += "---\n# ARC-shaped rows for tests\n"


def _rows(split: str, count: int) -> list[dict]:
    """ARC's row shape: id, question, choices {text, label}, answerKey."""
    return [
        {
            "id": f"{split}-{i}",
            "question": f"Which of these is item {i} of the {split} split?",
            "choices": {"text": [f"item {i}", f"thing {i}", f"other {i}", f"none {i}"], "label": ["A", "B", "C", "D"]},
            "answerKey": "ABCD"[i % 4],
        }
        for i in range(count)
    ]


def _parquet(rows: list[dict]) -> bytes:
    import pyarrow as pa
    import pyarrow.parquet as pq

    buffer = io.BytesIO()
    pq.write_table(pa.Table.from_pylist(rows), buffer)
    return buffer.getvalue()


ROWS = {split: _rows(split, count) for split, count in SPLITS.items()}
FILES = {"README.md": README.encode(), **{f"ARC-Easy/{s}-00000-of-00001.parquet": _parquet(r) for s, r in ROWS.items()}}


def _tool(*argv: str, env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "tools.eval_data", *argv], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
    )


@pytest.fixture(scope="module")
def staged(tmp_path_factory):
    """arc_easy staged from the loopback hub by the tool as a user runs it: (process, output folder, hub)."""
    out = tmp_path_factory.mktemp("staged")
    info = {"id": REPO, "sha": SHA, "private": False, "gated": False, "siblings": [{"rfilename": n} for n in FILES]}
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "AWS_", "TRANSFORMERS_"))}
    with serve({f"datasets/{REPO}": Repo(info, FILES)}) as hub:
        quiet = {"HF_HUB_DISABLE_PROGRESS_BARS": "1", "HF_DATASETS_DISABLE_PROGRESS_BARS": "1"}
        env.update({"HF_ENDPOINT": hub.url, "HF_HOME": str(out / "hf-home"), **quiet})
        process = _tool("arc_easy", "--out", str(out / "eval-data"), env=env)
    return process, out / "eval-data", hub


def test_each_split_the_task_reads_is_staged_as_the_repository_s_rows(staged):
    process, out, hub = staged
    assert (process.returncode, process.stderr) == (0, ""), process.stderr
    counts = ", ".join(f"{split} {count} rows" for split, count in SPLITS.items())
    assert process.stdout.splitlines() == [f"arc_easy: {REPO}@{SHA} -> {out.as_posix()}/arc_easy/ ({counts})"]
    assert sorted(p.name for p in (out / "arc_easy").iterdir()) == sorted(
        ["arc_easy.yaml", *(f"{s}.jsonl" for s in SPLITS)]
    )
    for split, rows in ROWS.items():
        assert [json.loads(line) for line in (out / "arc_easy" / f"{split}.jsonl").read_text().splitlines()] == rows
    resolved = {path for method, path, _ in hub.requests if method == "GET" and "/resolve/" in path}
    assert resolved == {f"/datasets/{REPO}/resolve/{SHA}/{name}" for name in FILES}  # every file at one commit


def test_lm_eval_builds_the_staged_task_as_the_benchmark_job_reads_it(staged):
    """The job's loader (data files beside the YAML) and lm-eval's task: every test row a document, prompts and
    targets as arc_easy's published template gives them."""
    from lm_eval.tasks import TaskManager

    if str(QLORA_CODE) not in sys.path:  # the job's package, as tests/training_code/qlora puts it there
        sys.path.insert(0, str(QLORA_CODE))
    from finetune.benchmark.tasks import staged_task

    _, out, _ = staged
    config = staged_task(str(out), "arc_easy")
    assert config["metadata"]["staged_from"] == {"dataset_path": REPO, "dataset_name": "ARC-Easy", "revision": SHA}
    task = TaskManager(include_defaults=False).load([config])["tasks"]["arc_easy"]
    docs = list(task.test_docs())
    assert len(docs) == SPLITS["test"]
    for doc, row in zip(docs, ROWS["test"], strict=True):
        assert task.doc_to_text(doc) == f"Question: {row['question']}\nAnswer:"
        assert task.doc_to_target(doc) == "ABCD".index(row["answerKey"])
        assert task.doc_to_choice(doc) == row["choices"]["text"]


@pytest.mark.parametrize(
    ("task", "line"),
    [
        ("arc_eazy", "arc_eazy: no such lm-eval task (nor in --include-path); `lm-eval ls tasks` lists them"),
        ("ai2_arc", "ai2_arc: an lm-eval tag of several tasks; stage each task by its name"),
    ],
)
def test_a_name_that_is_no_single_task_is_refused_in_one_line(tmp_path, capsys, task, line):
    from tools.eval_data import cli

    assert cli.main([task, "--out", str(tmp_path)]) == 2
    captured = capsys.readouterr()
    assert (captured.out, captured.err.splitlines()) == ("", [f"eval_data: refused: {line}"])
    assert list(tmp_path.iterdir()) == []


def _local_copy(folder: Path, files: dict[str, bytes]) -> Path:
    for name, data in files.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_bytes(data)
    return folder


def test_a_split_the_dataset_lacks_is_refused_before_anything_is_staged(tmp_path, capsys):
    from tools.eval_data import cli

    no_test = {name: data for name, data in FILES.items() if "test-" not in name}
    no_test["README.md"] = README.replace(
        "  - split: test\n    path: ARC-Easy/test-00000-of-00001.parquet\n", ""
    ).encode()
    source = _local_copy(tmp_path / "copy", no_test)
    assert cli.main(["arc_easy", "--source", str(source), "--out", str(tmp_path / "out")]) == 2
    said = [
        line for line in capsys.readouterr().err.splitlines() if line.startswith("eval_data:")
    ]  # not datasets' bars
    assert said == [
        "eval_data: refused: arc_easy: allenai/ai2_arc (ARC-Easy) has no split 'test' (it has train, validation); "
        "nothing staged"
    ]
    assert not (tmp_path / "out").exists()


def test_upload_puts_the_staged_folder_under_the_environment_s_prefix_and_key(tmp_path, capsys):
    from moto import mock_aws

    from tests.synth import with_catalog
    from tests.tools.test_promote_model import REGION, Account
    from tools.eval_data import cli

    source = _local_copy(tmp_path / "copy", FILES)
    (tmp_path / "config").mkdir()
    (tmp_path / "config" / "prod.yaml").write_text((ROOT / "config" / "prod.yaml").read_text())
    config_dir = with_catalog(tmp_path / "config")
    with mock_aws():
        account = Account()
        data = account.deploy_data("prod")
        argv = [
            "arc_easy",
            "--source",
            str(source),
            "--upload",
            "prod",
            "--config-dir",
            str(config_dir),
        ]
        assert cli.main([*argv, "--region", REGION]) == 0
        bucket, key_arn = data["ArtifactBucketName"], data["ArtifactKeyArn"]
        listed = account.s3.list_objects_v2(Bucket=bucket, Prefix="eval-data/arc_easy/")["Contents"]
        heads = {o["Key"]: account.s3.head_object(Bucket=bucket, Key=o["Key"]) for o in listed}
    assert sorted(heads) == sorted(
        f"eval-data/arc_easy/{n}" for n in ["arc_easy.yaml", *(f"{s}.jsonl" for s in SPLITS)]
    )
    assert {(h["ServerSideEncryption"], h["SSEKMSKeyId"]) for h in heads.values()} == {("aws:kms", key_arn)}
    assert capsys.readouterr().out.splitlines()[-1] == (
        f"uploaded 4 objects to s3://{bucket}/eval-data/arc_easy/ (SSE-KMS, {key_arn})"
    )
