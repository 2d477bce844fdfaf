"""`python -m tools.base_model s3://...` and `--upload <env>` on moto (S3, KMS, CloudFormation's DescribeStacks).

An environment is what its Data stack deploys (the shape tools/promote_model's tests deploy: a KMS key, the artifact
bucket, the stack's outputs). A copy in S3 is read with ranged GetObjects; an upload puts the model's files under
base-models/<name>/ with SSE-KMS and the environment's key, then config/<env>.yaml changes in exactly the lines of
training.base_model_key (and of a hub model_id the copy replaces). A refused upload writes nothing.
"""

from __future__ import annotations

import difflib
import json
import os
import subprocess
import sys
import urllib.request
from pathlib import Path

import boto3
import pytest
import yaml
from moto import mock_aws
from transformers import LlamaConfig, LlamaForCausalLM

from stacks.config.base_model_record import parse_record
from tests.synth import ROOT, with_catalog
from tests.tools.hub_server import Repo, serve
from tests.tools.moto_server import loopback_moto_server
from tests.tools.test_base_model_facts import saved_llama
from tests.tools.test_promote_model import REGION, Account, _data_template
from tools.base_model import main


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory) -> Path:
    """A saved tiny Llama (config.json, model.safetensors, a chat template): what a user's folder holds."""
    folder = tmp_path_factory.mktemp("models") / "tiny-llama"
    saved_llama(folder, tied=False)
    (folder / "tokenizer_config.json").write_text(json.dumps({"chat_template": "{{ messages }}"}))
    return folder


@pytest.fixture
def account():
    with mock_aws():
        yield Account()


def _tool(capsys, *argv: str) -> tuple[int, list[str], list[str]]:
    code = main([*argv, "--region", REGION])
    captured = capsys.readouterr()
    return code, captured.out.splitlines(), captured.err.splitlines()


def _record(path: Path):
    return parse_record(yaml.safe_load(path.read_text()), source=str(path))


def _put_folder(s3, folder: Path, bucket: str, prefix: str) -> None:
    for path in sorted(folder.iterdir()):
        s3.put_object(Bucket=bucket, Key=prefix + path.name, Body=path.read_bytes())


def _config_dir(tmp_path: Path, *envs: str) -> Path:
    config_dir = tmp_path / "config"
    config_dir.mkdir()
    for env in envs:
        (config_dir / f"{env}.yaml").write_text((ROOT / "config" / f"{env}.yaml").read_text())
    return with_catalog(config_dir)


def _upload(tmp_path: Path, env: str) -> list[str]:
    return ["--upload", env, "--config-dir", str(tmp_path / "config"), "--output", str(tmp_path / "config" / "models")]


def _changed_lines(before: str, after: str) -> list[str]:
    diff = difflib.unified_diff(before.splitlines(), after.splitlines(), lineterm="")
    return [line for line in diff if line[:1] in "+-" and line[:3] not in ("+++", "---")]


def test_an_s3_copy_is_recorded_like_the_folder_it_came_from(account, tiny_model, tmp_path, capsys):
    account.s3.create_bucket(Bucket="models-bucket")
    _put_folder(account.s3, tiny_model, "models-bucket", "base-models/tiny-llama/")
    code, out, err = _tool(
        capsys,
        "s3://models-bucket/base-models/tiny-llama/",
        "--hub-id",
        "org/tiny-llama",
        "--output",
        str(tmp_path / "s3"),
    )
    print("\n".join(out))
    assert (code, err) == (0, [])
    assert _tool(capsys, str(tiny_model), "--hub-id", "org/tiny-llama", "--output", str(tmp_path / "local"))[0] == 0
    from_s3, from_folder = _record(tmp_path / "s3" / "tiny-llama.yaml"), _record(tmp_path / "local" / "tiny-llama.yaml")
    assert from_s3.source == "s3://models-bucket/base-models/tiny-llama/"
    assert {**from_s3.__dict__, "source": None} == {**from_folder.__dict__, "source": None}
    assert (
        from_s3.parameters
        == LlamaForCausalLM(LlamaConfig(**json.loads((tiny_model / "config.json").read_text()))).num_parameters()
        and from_s3.chat_template is True
    )


@pytest.mark.parametrize(
    ("uri", "line"),
    [
        (
            "s3://models-bucket/empty/",
            "s3://models-bucket/empty/: no config.json; give the prefix of a saved model (config.json, *.safetensors)",
        ),
        (
            "s3://no-such-bucket/x/",
            "s3://no-such-bucket/x/: cannot be read (NoSuchBucket): use credentials that may "
            "s3:ListBucket and s3:GetObject there (and kms:Decrypt on its key)",
        ),
    ],
)
def test_an_s3_prefix_without_a_model_is_refused_in_one_line(account, tmp_path, capsys, uri, line):
    account.s3.create_bucket(Bucket="models-bucket")
    code, out, err = _tool(capsys, uri, "--output", str(tmp_path))
    assert (code, out, err) == (2, [], [f"base_model: refused: {line}"])


def _uploaded(account: Account, env: str, prefix: str) -> list[str]:
    bucket, key_arn = account.data[env]["ArtifactBucketName"], account.data[env]["ArtifactKeyArn"]
    keys = sorted(o["Key"] for o in account.s3.list_objects_v2(Bucket=bucket, Prefix=prefix).get("Contents", []))
    for key in keys:
        head = account.s3.head_object(Bucket=bucket, Key=key)
        assert (head["ServerSideEncryption"], head["SSEKMSKeyId"]) == ("aws:kms", key_arn), key
    return [key.removeprefix(prefix) for key in keys]


def test_upload_copies_the_folder_under_the_environment_s_key_and_points_the_config_at_it(
    account, tiny_model, tmp_path, capsys
):
    data = account.deploy_data("prod")
    config_dir = _config_dir(tmp_path, "prod")
    before = (config_dir / "prod.yaml").read_text()
    code, out, err = _tool(capsys, str(tiny_model), "--hub-id", "org/Tiny-Llama", *_upload(tmp_path, "prod"))
    print("\n".join(out))
    assert (code, err) == (0, [])
    assert _uploaded(account, "prod", "base-models/tiny-llama/") == sorted(p.name for p in tiny_model.iterdir())
    assert out[2:] == [
        f"uploaded 4 objects to s3://{data['ArtifactBucketName']}/base-models/tiny-llama/ (SSE-KMS, "
        f"{data['ArtifactKeyArn']})",
        f"{config_dir.as_posix()}/prod.yaml: training.base_model_key set",
    ]
    after = (config_dir / "prod.yaml").read_text()
    assert _changed_lines(before, after) == [
        "-  base_model_key: base-models/llama-2-7b-chat-hf/",
        "+  base_model_key: base-models/tiny-llama/",
    ]
    assert yaml.safe_load(after)["training"]["base_model_key"] == "base-models/tiny-llama/"


def test_upload_from_s3_copies_server_side_and_replaces_a_hub_model_id(account, tiny_model, tmp_path, capsys):
    account.deploy_data("staging")
    account.s3.create_bucket(Bucket="models-bucket")
    _put_folder(account.s3, tiny_model, "models-bucket", "tiny/")
    config_dir = _config_dir(tmp_path, "staging")
    before = (config_dir / "staging.yaml").read_text()
    code, out, err = _tool(capsys, "s3://models-bucket/tiny/", "--hub-id", "org/tiny", *_upload(tmp_path, "staging"))
    assert (code, err) == (0, [])
    assert out[-1].endswith(
        "staging.yaml: training.base_model_key set; training.hyperparameters.model_id Qwen/Qwen2.5-7B-Instruct removed"
    )
    assert _uploaded(account, "staging", "base-models/tiny/") == sorted(p.name for p in tiny_model.iterdir())
    assert _changed_lines(before, (config_dir / "staging.yaml").read_text()) == [
        "-    model_id: Qwen/Qwen2.5-7B-Instruct",
        "+  base_model_key: base-models/tiny/",
    ]


def test_upload_to_an_environment_not_deployed_is_refused_before_anything_is_written(
    account, tiny_model, tmp_path, capsys
):
    config_dir = _config_dir(tmp_path, "prod")
    code, out, err = _tool(capsys, str(tiny_model), *_upload(tmp_path, "prod"))
    assert (code, out) == (2, [])
    assert err == [
        "base_model: refused: environment prod: its Data stack llm-inf2-prod-Data cannot be described "
        "(ValidationError): deploy it first (make deploy TARGET=aws ENV=prod) with these credentials"
    ]
    assert not (config_dir / "models" / "tiny-llama.yaml").exists()
    assert (config_dir / "prod.yaml").read_text() == (ROOT / "config" / "prod.yaml").read_text()


@pytest.fixture(scope="module")
def moto_server():
    """moto's server on a free loopback port, for the tool in its own process (--endpoint-url)."""
    with loopback_moto_server() as url:
        yield url


def _hub_upload(moto_server: str, tiny_model: Path, tmp_path: Path, *, tree_refused: bool = False):
    """`--upload prod` of hub id org/tiny-hub as a user runs it: HF_ENDPOINT at the loopback hub, the environment
    deployed on the emulator (make deploy KEEP=1's --endpoint-url). (the process, the Data stack's outputs, files)"""
    urllib.request.urlopen(urllib.request.Request(f"{moto_server}/moto-api/reset", method="POST"), timeout=10)
    keys = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing"}
    client = {"endpoint_url": moto_server, "region_name": REGION, **{k.lower(): v for k, v in keys.items()}}
    cloudformation = boto3.client("cloudformation", **client)
    cloudformation.create_stack(StackName="llm-inf2-prod-Data", TemplateBody=json.dumps(_data_template("models")))
    described = cloudformation.describe_stacks(StackName="llm-inf2-prod-Data")["Stacks"][0]
    files = {path.name: path.read_bytes() for path in tiny_model.iterdir()}
    info = {
        "id": "org/tiny-hub",
        "sha": "1" * 40,
        "gated": False,
        "private": False,
        "siblings": [{"rfilename": name} for name in sorted(files)],
    }
    _config_dir(tmp_path, "prod")
    environ = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "TRANSFORMERS_", "AWS_"))} | keys
    with serve({"org/tiny-hub": Repo(info, files, tree_refused=tree_refused)}) as hub:
        environ |= {"HF_ENDPOINT": hub.url, "HF_HOME": str(tmp_path / "hf"), "HF_HUB_DISABLE_TELEMETRY": "1"}
        done = subprocess.run(
            [sys.executable, "-m", "tools.base_model", "org/tiny-hub", *_upload(tmp_path, "prod"), "--region", REGION]
            + ["--endpoint-url", moto_server],
            cwd=ROOT,
            env=environ,
            capture_output=True,
            text=True,
            timeout=60,
        )
    return done, {o["OutputKey"]: o["OutputValue"] for o in described["Outputs"]}, files, boto3.client("s3", **client)


def test_upload_of_a_hub_model_copies_its_snapshot_at_the_recorded_commit(moto_server, tiny_model, tmp_path):
    done, outputs, files, s3 = _hub_upload(moto_server, tiny_model, tmp_path)
    config_dir = tmp_path / "config"
    assert done.returncode == 0, done.stderr
    assert _record(tmp_path / "config" / "models" / "tiny-hub.yaml").revision == "1" * 40
    prefix, bucket = "base-models/tiny-hub/", outputs["ArtifactBucketName"]
    listed = sorted(o["Key"] for o in s3.list_objects_v2(Bucket=bucket, Prefix=prefix)["Contents"])
    assert [key.removeprefix(prefix) for key in listed] == sorted(files)
    head = s3.head_object(Bucket=bucket, Key=listed[0])
    assert (head["ServerSideEncryption"], head["SSEKMSKeyId"]) == ("aws:kms", outputs["ArtifactKeyArn"])
    assert yaml.safe_load((config_dir / "prod.yaml").read_text())["training"]["base_model_key"] == prefix


def test_an_incomplete_hub_download_is_not_uploaded(moto_server, tiny_model, tmp_path):
    """snapshot_download answers a failed file listing with the cached files (those the record was read from)."""
    done, outputs, files, s3 = _hub_upload(moto_server, tiny_model, tmp_path, tree_refused=True)
    missing = sorted(set(files) - {"config.json", "tokenizer_config.json"})
    assert (done.returncode, done.stderr.splitlines()) == (
        2,
        [
            f"base_model: refused: org/tiny-hub@{'1' * 40}: the download lacks {len(missing)} of its files "
            f"({', '.join(missing)}); run again where the hub can be reached, nothing uploaded"
        ],
    )
    listed = s3.list_objects_v2(Bucket=outputs["ArtifactBucketName"], Prefix="base-models/")
    assert listed.get("KeyCount") == 0 and not (tmp_path / "config" / "models" / "tiny-hub.yaml").exists()
    assert yaml.safe_load((tmp_path / "config" / "prod.yaml").read_text())["training"]["base_model_key"] == (
        "base-models/llama-2-7b-chat-hf/"
    )
