"""Extension cost: a third serving backend lands as one folder, its images and its config files, nothing else.

A throw-away backend (`toy_neuronx`) is written into a copy of the repository: its folder under
stacks/serving/backends/ (its `Backend` subclass with a compile step, settings, contract, endpoint construct and
local server), its images in stacks/images.json, and an environment file that serves with it. In that copy the
config validates with the backend's own section and rule, the Serving stack builds the backend's endpoint with its
image from the region table, the Training stack runs its compile step in its image and registers models for it,
local/servers/llm_endpoint starts its local server and tools/invoke.py speaks its contract, all found through the
registry (stacks/serving/backends/__init__.py) without another edit.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from tests.stacks.training.test_training_stack import definition
from tests.synth import ROOT, cli_context, lock_document

NAME = "toy_neuronx"
FOLDER = f"stacks/serving/backends/{NAME}"
CONFIG_FILE = "config/toy.yaml"
LOCK_FILE = "config/toy.model.json"  # the promoted version it serves (tools/promote_model writes it)
IMAGE = "123456789012.dkr.ecr.{region}.amazonaws.com/toy-inference-neuronx:1.0.0"
REGIONS = ("eu-west-1", "us-east-1")
OUTSIDE = ["stacks/images.json"]  # the only file it touches outside its folder and config/
COMPILED_PREFIX = "models/toy/toy/s5/toy-n-0/output/model/"  # the compile step's folder for max_tokens 5

BACKEND_FILES = {
    "__init__.py": '''
        """A throw-away backend: an echo container, to measure what adding a backend touches."""

        from __future__ import annotations

        from ..backend import Backend, CompileStep
        from .config import ToyOptions, check
        from .contract import build_request, parse_response


        class ToyCompile(CompileStep):
            program = "Toy compile"

            def folder(self, serving):
                return f"toy/s{serving.toy.max_tokens}/"

            def entrypoint(self):
                return ("/bin/bash", "-c", 'toy-compile "$@"', "toy-compile")

            def arguments(self, serving):
                return ("--max-tokens", str(serving.toy.max_tokens), "/opt/ml/model")


        class ToyNeuronx(Backend):
            name = "toy_neuronx"
            label = "Toy Neuron"
            model_name_hint = "the echoed model name"
            section = "toy"
            options = ToyOptions
            section_hint = "toy_neuronx only"
            images = ("toy_neuronx",)
            model_environment = {"TOY_MODEL": "/opt/ml/model"}
            local_server = "stacks.serving.backends.toy_neuronx.local_server"
            compile = ToyCompile()
            serves_compiled = True
            architectures = ("llama",)

            def check(self, serving, source, path):
                check(serving, source, path)

            def build_request(self, args):
                return build_request(args)

            def parse_response(self, body, status=200):
                return parse_response(body, status)

            def endpoint(self):
                from .endpoint import ToyNeuronxEndpoint

                return ToyNeuronxEndpoint


        BACKEND = ToyNeuronx()
    ''',
    "config.py": """
        from __future__ import annotations

        from dataclasses import dataclass
        from typing import Any

        from stacks.config.errors import ConfigError
        from stacks.config.schema import setting


        @dataclass(frozen=True)
        class ToyOptions:
            max_tokens: int = setting(256, ge=1, le=4096)


        def check(serving: Any, source: str, path: str) -> None:
            if serving.toy.max_tokens > 2048:
                raise ConfigError(source, f"{path}.toy.max_tokens", "exceeds the toy's 2048 tokens")
    """,
    "contract.py": """
        from __future__ import annotations

        from typing import Any

        from ..contract import InvokeError, json_body


        def build_request(args: Any) -> dict[str, Any]:
            return {"text": args.prompt or "hello", "max_tokens": args.max_new_tokens}


        def parse_response(body: bytes | str, status: int = 200) -> list[str]:
            data, text = json_body(body, status)
            if status >= 400 or not isinstance(data, dict) or "echo" not in data:
                raise InvokeError(f"HTTP {status}: no echo in {text[:200]!r}")
            return [data["echo"]]
    """,
    "endpoint.py": """
        from __future__ import annotations

        from constructs import Construct

        from stacks.serving.hosting import EndpointProps, llm_hosting
        from stacks.shared.sagemaker_endpoint import ContainerSpec


        class ToyNeuronxEndpoint(Construct):
            def __init__(self, scope: Construct, construct_id: str, *, props: EndpointProps) -> None:
                super().__init__(scope, construct_id)
                self.model_asset = None
                container = ContainerSpec(
                    image_uri=props.image_uri,
                    environment={"TOY_MODEL": "/opt/ml/model", "TOY_MAX_TOKENS": str(props.serving.toy.max_tokens)},
                    model_data_source_uri=props.model_uri,
                    network_isolation=True,
                )
                self.hosting = llm_hosting(self, props, container=container, revision="toy")
                self.endpoint_name = self.hosting.endpoint_name
    """,
    "local_server.py": '''
    """The toy backend's local server: echoes `text`, cut to `max_tokens` characters."""

    from __future__ import annotations

    import json
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
    from pathlib import Path


    class Echo(BaseHTTPRequestHandler):
        def do_POST(self):
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            answer = json.dumps({"echo": body["text"][: body["max_tokens"]]}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(answer)))
            self.end_headers()
            self.wfile.write(answer)


    def serve_cli(args) -> int:
        server = ThreadingHTTPServer((args.host, args.port), Echo)
        Path(args.port_file).write_text(str(server.server_address[1]), encoding="utf-8")
        server.serve_forever()
        return 0
    ''',
}
CONFIG = """
    training:
      hyperparameters:
        model_id: TinyLlama/TinyLlama-1.1B-Chat-v1.0
    serving:
      backend: toy_neuronx
      model_name: toy
      toy:
        max_tokens: 5
"""
SYNTH = """
import json, sys, tempfile
from pathlib import Path
sys.path.insert(0, ".")
from stacks.config import load_config
from tests.synth import synth, templates

config = load_config("toy", Path("config"))
with tempfile.TemporaryDirectory() as out:
    found = templates(synth(config, Path(out)))
print(json.dumps({"serving": found["Serving"], "training": found["Training"]}))
"""


def _copy_repository(tree: Path) -> None:
    """The tracked tree as it stands in this checkout (with uncommitted edits), no ignored files."""
    listed = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard", "-z"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    )
    for name in listed.stdout.split("\0"):
        source = ROOT / name
        if name and source.is_file() and not source.is_symlink():
            (tree / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(source, tree / name)


def _fingerprints(tree: Path) -> dict[str, str]:
    return {
        p.relative_to(tree).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in tree.rglob("*")
        if p.is_file() and "__pycache__" not in p.parts
    }


def _write(tree: Path, name: str, text: str) -> None:
    (tree / name).parent.mkdir(parents=True, exist_ok=True)
    (tree / name).write_text(textwrap.dedent(text).lstrip(), encoding="utf-8")


def _add_third_backend(tree: Path) -> None:
    for file, text in BACKEND_FILES.items():
        _write(tree, f"{FOLDER}/{file}", text)
    table = json.loads((tree / "stacks/images.json").read_text())  # what `make images` writes for its pin
    table["images"][NAME] = {"pin": {"toy": "1.0.0"}, "uris": {r: IMAGE.format(region=r) for r in REGIONS}}
    (tree / "stacks/images.json").write_text(json.dumps(table, indent=1, sort_keys=True) + "\n")
    _write(tree, CONFIG_FILE, CONFIG)
    # it serves the compiled model: the lock names its compile step's folder, and no recorded shape
    lock = lock_document(
        "dev", model_prefix="models/toy/", compiled_prefix=COMPILED_PREFIX, compiled=None, serving__backend=NAME
    )
    lock["serving"]["image"] = IMAGE.format(region="us-east-1")
    (tree / LOCK_FILE).write_text(json.dumps(lock, indent=2, sort_keys=True) + "\n")


@pytest.fixture(scope="module")
def toy_tree(tmp_path_factory) -> tuple[Path, list[str]]:
    """The repository copy with the third backend, and the files it touched outside its folder and config."""
    tree = tmp_path_factory.mktemp("third-backend")
    _copy_repository(tree)
    before = _fingerprints(tree)
    _add_third_backend(tree)
    after = _fingerprints(tree)
    touched = sorted(n for n in after if before.get(n) != after[n])
    others = [n for n in touched if not n.startswith(f"{FOLDER}/") and n not in (CONFIG_FILE, LOCK_FILE)]
    print(f"a third backend touched {len(touched)} files: {touched}; outside its folder and config: {others}")
    return tree, others


def test_a_third_backend_touches_only_its_folder_the_image_table_and_config(toy_tree):
    _, others = toy_tree
    assert others == OUTSIDE


@pytest.fixture(scope="module")
def toy_templates(toy_tree) -> dict[str, dict]:
    """The copy's Serving and Training templates of config/toy.yaml."""
    tree, _ = toy_tree
    done = subprocess.run([sys.executable, "-c", SYNTH], cwd=tree, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_its_endpoint_synthesizes_with_its_image_and_section(toy_templates):
    found = toy_templates
    serving = found["serving"]
    models = [r for r in serving["Resources"].values() if r["Type"] == "AWS::SageMaker::Model"]
    assert len(models) == 1
    container = models[0]["Properties"]["PrimaryContainer"]
    assert container["Environment"] == {"TOY_MAX_TOKENS": "5", "TOY_MODEL": "/opt/ml/model"}
    lookup = container["Image"]["Fn::FindInMap"]
    assert lookup[2] == "ToyNeuronxUri"
    mapping = serving["Mappings"][lookup[0]]
    assert {r: row["ToyNeuronxUri"] for r, row in mapping.items()} == {r: IMAGE.format(region=r) for r in REGIONS}
    roles = [r for r in serving["Resources"].values() if r["Type"] == "AWS::IAM::Role"]
    assert any("Toy Neuron endpoint execution role" in r["Properties"].get("Description", "") for r in roles)
    assert container["ModelDataSource"]["S3DataSource"]["S3Uri"]["Fn::Join"][1][-1] == f"/{COMPILED_PREFIX}"
    packages = json.dumps(found["training"])
    assert "TOY_MODEL" in packages and "toy_neuronx" in packages  # Model Registry packages name the backend


def test_its_compile_step_runs_its_program_in_its_image(toy_templates):
    """The Training workflow's compile job: the toy's entrypoint and arguments, its folder, its image's row."""
    training = toy_templates["training"]
    params = definition(training)["States"]["CompileForNeuron"]["Parameters"]
    algorithm = params["AlgorithmSpecification"]
    assert algorithm["ContainerEntrypoint"] == ["/bin/bash", "-c", 'toy-compile "$@"', "toy-compile"]
    assert algorithm["ContainerArguments"] == ["--max-tokens", "5", "/opt/ml/model"]
    assert "ToyNeuronxUri" in algorithm["TrainingImage"]
    assert params["OutputDataConfig"]["S3OutputPath.$"].endswith("/models/{}/toy/s5/', $.training.job_name)")
    roles = [
        r["Properties"].get("Description", "") for r in training["Resources"].values() if r["Type"] == "AWS::IAM::Role"
    ]
    assert "SageMaker execution role of the Neuron compile jobs (Toy compile)" in roles


def test_its_config_section_and_rule_fail_with_one_line(toy_tree):
    tree, _ = toy_tree
    bad = (tree / CONFIG_FILE).read_text().replace("max_tokens: 5", "max_tokens: 4000")
    (tree / "config/toybad.yaml").write_text(bad)
    env = {**os.environ, "CDK_CONTEXT_JSON": json.dumps({**cli_context(), "env": "toybad"})}
    env["CDK_OUTDIR"] = str(tree / "cdk.out")
    done = subprocess.run([sys.executable, "app.py"], cwd=tree, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode != 0
    assert done.stderr.strip().splitlines()[-1].endswith("serving.toy.max_tokens: exceeds the toy's 2048 tokens")


def test_its_local_server_and_invoke_contract_come_from_the_registry(toy_tree, tmp_path):
    tree, _ = toy_tree
    port_file = tmp_path / "port"
    server = subprocess.Popen(
        [sys.executable, "local/servers/llm_endpoint", "--backend", NAME, "--model-dir", str(tmp_path)]
        + ["--port", "0", "--port-file", str(port_file)],
        cwd=tree,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 60
        while not port_file.exists() and server.poll() is None and time.monotonic() < deadline:
            time.sleep(0.1)
        assert port_file.exists(), server.stderr.read() if server.poll() is not None else "no port after 60 s"
        url = f"http://127.0.0.1:{port_file.read_text()}"
        invoked = subprocess.run(
            [sys.executable, "tools/invoke.py", "--backend", NAME, "--url", url, "--prompt", "hello world"]
            + ["--max-new-tokens", "5"],
            cwd=tree,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert invoked.returncode == 0, invoked.stderr
        assert invoked.stdout.strip() == "hello"
    finally:
        server.terminate()
        server.wait(timeout=30)


def test_a_folder_whose_record_names_another_backend_is_refused(tmp_path, monkeypatch):
    """The folder's name is serving.backend's value: a record that says otherwise fails with one line."""
    import importlib
    import sys

    from stacks.serving import backends

    folder = tmp_path / "misnamed_neuronx"
    folder.mkdir()
    (folder / "__init__.py").write_text("from types import SimpleNamespace\nBACKEND = SimpleNamespace(name='other')\n")
    monkeypatch.setattr(backends, "__path__", [str(tmp_path)])
    monkeypatch.delitem(sys.modules, f"{backends.__name__}.misnamed_neuronx", raising=False)
    importlib.invalidate_caches()
    with pytest.raises(ValueError, match=r"^stacks/serving/backends/misnamed_neuronx/ declares backend 'other'$"):
        backends.backends.__wrapped__()
