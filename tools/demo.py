"""`make demo`: build a tiny Llama, QLoRA fine-tune and merge it, serve it locally, ask the seed's sample prompt.

    python tools/demo.py [--workdir build/demo] [--max-steps 20]

Everything is local and offline: the tiny model and tokenizer come from training_code/qlora/qlora_tiny.py,
training and merging from training_code/qlora/train.py on data/instructions.jsonl, serving from
tools/local_endpoint.py with a serving.properties rendered from the model's template. Prints the answer and
how long each step took. The model is tiny and trained for seconds: expect words from the dataset, not sense.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
QLORA = ROOT / "training_code" / "qlora"
DATA = ROOT / "data" / "instructions.jsonl"
SERVER = ROOT / "tools" / "local_endpoint.py"
DEFAULT_MODEL_NAME = "tinyllama-1.1b-chat"

# The seed notebook's sample request.
SAMPLE_PROMPT = "<s>[INST] <<SYS>>\nAs a data scientist\n<</SYS>>\nWhat is a machine learning? [/INST]"
SAMPLE_PARAMETERS = {"max_new_tokens": 300, "do_sample": True, "stop": ["</s>"]}

# Settings that differ from the real endpoint because the model is tiny and runs on a CPU.
DEMO_LMI = {"n_positions": 512, "dtype": "fp32", "max_rolling_batch_size": 4}

TRAIN_FLAGS = [
    "--max_seq_length", "128",
    "--per_device_batch_size", "8",
    "--lora_r", "16",
    "--lora_alpha", "32",
    "--learning_rate", "1e-2",
    "--compute_dtype", "float32",
    "--logging_steps", "10",
    "--save_steps", "100000",
    "--no-gradient_checkpointing",
    "--no-resume",
]  # fmt: skip


def _run(step: str, argv: list[str], timings: dict[str, float], quiet: bool) -> None:
    print(f"== {step}: {' '.join(Path(a).name if a == sys.executable else a for a in argv)}", flush=True)
    started = time.perf_counter()
    result = subprocess.run(argv, cwd=ROOT, capture_output=quiet, text=True, timeout=900)
    timings[step] = time.perf_counter() - started
    if result.returncode != 0:
        if quiet:
            sys.stderr.write(result.stdout[-4000:] + result.stderr[-4000:])
        raise SystemExit(f"demo: {step} failed with exit code {result.returncode}")


def lmi_values(model_name: str | None = None) -> tuple[str, dict]:
    """The model folder and serving.lmi of config/dev.yaml, with the tiny model's DEMO_LMI on top."""
    values: dict = {}
    try:
        import yaml

        serving = yaml.safe_load((ROOT / "config" / "dev.yaml").read_text(encoding="utf-8")).get("serving") or {}
        values = dict(serving.get("lmi") or {})
        model_name = model_name or serving.get("model_name")
    except (OSError, ImportError, AttributeError):
        pass
    values.update(DEMO_LMI)
    return model_name or DEFAULT_MODEL_NAME, values


def render_properties(template: Path, values: dict) -> str:
    """Fill `{{setting}}` placeholders; a line whose setting is missing or null is left out (LMI's default)."""
    lines = []
    for line in template.read_text(encoding="utf-8").splitlines():
        names = re.findall(r"\{\{\s*([a-z_]+)\s*\}\}", line)
        if any(values.get(name) is None for name in names):
            continue
        for name in names:
            value = values[name]
            text = ("true" if value else "false") if isinstance(value, bool) else str(value)
            text = ",".join(map(str, value)) if isinstance(value, list) else text
            line = re.sub(r"\{\{\s*" + name + r"\s*\}\}", text, line)
        lines.append(line)
    return "\n".join(lines) + "\n"


def prompt_tokens(model_dir: Path, prompt: str) -> int:
    """Prompt length as the server counts it: the tokenizer's ids with exactly one leading BOS."""
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(str(model_dir / "tokenizer.json"))
    ids = tokenizer.encode(prompt, add_special_tokens=False).ids
    bos = tokenizer.token_to_id("<s>")
    return len(ids) + (0 if bos is None or (ids and ids[0] == bos) else 1)


def _post(url: str, payload: dict, timeout: float = 300) -> tuple[int, dict]:
    request = urllib.request.Request(
        url, data=json.dumps(payload).encode(), headers={"Content-Type": "application/json"}, method="POST"
    )
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read() or b"{}")


def _wait_ready(server: subprocess.Popen, port_file: Path, timeout: float) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if server.poll() is not None:
            raise SystemExit(f"demo: the local server exited with code {server.returncode}")
        if port_file.is_file() and port_file.read_text().strip():
            url = f"http://127.0.0.1:{port_file.read_text().strip()}"
            try:
                with urllib.request.urlopen(url + "/ping", timeout=5) as response:
                    if response.status == 200:
                        return url
            except OSError:
                pass
        time.sleep(0.2)
    raise SystemExit(f"demo: the local server did not answer /ping within {timeout:.0f} s")


def serve_and_ask(model_dir: Path, properties: Path, work: Path, timings: dict, args: argparse.Namespace) -> dict:
    port_file = work / "server.port"
    port_file.unlink(missing_ok=True)
    log = (work / "server.log").open("w")
    argv = [sys.executable, str(SERVER), "--model-dir", str(model_dir), "--properties", str(properties)]
    argv += ["--port", "0", "--port-file", str(port_file)]
    print(f"== serve: tools/local_endpoint.py --model-dir {model_dir} --properties {properties}", flush=True)
    started = time.perf_counter()
    server = subprocess.Popen(argv, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT)
    try:
        url = _wait_ready(server, port_file, timeout=600)
        timings["serve (load until /ping)"] = time.perf_counter() - started
        n_positions = int(DEMO_LMI["n_positions"])
        parameters = dict(SAMPLE_PARAMETERS)
        wanted = args.max_new_tokens
        parameters["max_new_tokens"] = min(wanted, n_positions - prompt_tokens(model_dir, SAMPLE_PROMPT))
        answer: dict = {}
        for attempt in range(3):  # a sampled answer of a tiny model can be an immediate </s>: try another seed
            sampled = {**parameters, "seed": args.seed + attempt, "details": True}
            payload = {"inputs": SAMPLE_PROMPT, "parameters": sampled}
            print(f"== invoke: POST {url}/invocations {json.dumps(payload)[:160]}...", flush=True)
            sent = time.perf_counter()
            status, answer = _post(url + "/invocations", payload)
            timings["invoke"] = time.perf_counter() - sent
            if status != 200:
                raise SystemExit(f"demo: the server answered {status}: {answer}")
            if answer.get("generated_text", "").strip():
                break
        return answer
    finally:
        server.terminate()
        try:
            server.wait(timeout=15)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait(timeout=15)
        log.close()


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workdir", default=str(ROOT / "build" / "demo"), help="wiped and rebuilt on every run")
    parser.add_argument("--data", default=str(DATA), help="instruction JSONL to fine-tune on")
    parser.add_argument("--max-steps", type=int, default=20, help="QLoRA optimizer steps")
    parser.add_argument("--seed", type=int, default=0, help="sampling seed of the sample request")
    parser.add_argument(
        "--max-new-tokens", type=int, default=300, help="the sample's max_new_tokens, capped to fit n_positions"
    )
    parser.add_argument("--verbose", action="store_true", help="show the output of every step")
    args = parser.parse_args(argv)
    quiet = not args.verbose
    work = Path(args.workdir).resolve()
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    timings: dict[str, float] = {}
    total = time.perf_counter()
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    # One intra-op thread per process: this model's matmuls are too small to share, and on a busy machine a
    # second OpenMP thread spin-waits for a core (measured: 8 QLoRA steps 8 s with one thread, 75 s with two).
    os.environ.setdefault("OMP_NUM_THREADS", "1")

    base, trained = work / "base", work / "train"
    _run("tiny model", [sys.executable, str(QLORA / "qlora_tiny.py"), "--out", str(base), "--data", args.data],
         timings, quiet)  # fmt: skip
    _run(
        "qlora train + merge",
        [sys.executable, str(QLORA / "train.py"), "--model_id", str(base), "--train_data", args.data,
         "--output_dir", str(trained), "--max_steps", str(args.max_steps), *TRAIN_FLAGS],
        timings,
        quiet,
    )  # fmt: skip
    report = json.loads((trained / "training_report.json").read_text(encoding="utf-8"))
    model_dir = trained / "model"

    model_name, values = lmi_values()
    template = ROOT / "serving_artifacts" / model_name / "serving.properties"
    if not template.is_file():
        template = ROOT / "serving_artifacts" / DEFAULT_MODEL_NAME / "serving.properties"
    properties = work / "serving.properties"
    properties.write_text(render_properties(template, values))
    answer = serve_and_ask(model_dir, properties, work, timings, args)
    timings["total"] = time.perf_counter() - total

    details = answer.get("details", {})
    print("\n== prompt\n" + SAMPLE_PROMPT)
    print("\n== answer\n" + answer.get("generated_text", ""))
    print(f"\n(finish_reason {details.get('finish_reason')}, {details.get('generated_tokens')} tokens)")
    loss = (report.get("train_metrics") or {}).get("train_loss")
    print(f"train_loss {loss}" if loss is not None else "")
    print("\n== timings")
    for step, seconds in timings.items():
        print(f"{step:<28}{seconds:8.1f} s")
        if step.startswith("qlora"):
            for phase, phase_seconds in (report.get("durations_seconds") or {}).items():
                print(f"  {phase:<26}{phase_seconds:8.1f} s")
    tokens = details.get("generated_tokens") or 0
    if tokens and timings.get("invoke"):
        print(f"{'generation speed':<28}{tokens / timings['invoke']:8.1f} tokens/s")
    (work / "demo_result.json").write_text(json.dumps({"answer": answer, "timings": timings}, indent=2))
    return {"answer": answer, "timings": timings}


if __name__ == "__main__":
    main()
