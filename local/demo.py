"""`make demo`: pretrain a tiny Llama, QLoRA fine-tune and merge it, serve both locally, ask the seed's prompt.

    python local/demo.py [--workdir build/demo] [--max-steps 300] [--pretrain-steps 300]

Everything is local and offline. A LoRA adapter on a random-init base cannot learn, so the base is first
pretrained for about a minute on data/corpus.txt (training_code/qlora/finetune/pretrain.py; cached under
build/pretrained/, so later runs reuse it at once), then QLoRA-fine-tuned and merged by
training_code/qlora/train.py on data/instructions.jsonl. local/servers/llm_endpoint serves the base and then the
fine-tuned model with the same serving.properties, and both answer the sample prompt with the same greedy
decoding, printed side by side with the dataset's closest answer and each answer's word overlap with it.
The model has a million parameters: expect the dataset's phrasing, not always its facts.
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
SERVER = ROOT / "local" / "servers" / "llm_endpoint"
# The LMI NeuronX backend's one template, the file the stacks render for every model
PROPERTIES_TEMPLATE = ROOT / "stacks" / "serving" / "backends" / "lmi_neuronx" / "serving.properties"

# The seed notebook's sample request.
SAMPLE_PROMPT = "<s>[INST] <<SYS>>\nAs a data scientist\n<</SYS>>\nWhat is a machine learning? [/INST]"
# Greedy, so the base and the fine-tuned answers differ only by the model, and a rerun prints the same text.
SAMPLE_PARAMETERS = {"max_new_tokens": 300, "do_sample": False, "stop": ["</s>"]}

# Settings that differ from the real endpoint because the model is tiny and runs on a CPU.
DEMO_LMI = {"n_positions": 512, "dtype": "fp32", "max_rolling_batch_size": 4}

# Rank 64 of 128 hidden features and the output head among the targets: the tiny base's head has barely seen
# the dataset's words (measured, 200 steps: train_loss 5.09 -> 2.02 without the head, -> 0.86 with it).
LORA_TARGETS = "q_proj,k_proj,v_proj,o_proj,gate_proj,up_proj,down_proj,lm_head"
TRAIN_FLAGS = [
    "--max_seq_length", "128",
    "--per_device_batch_size", "8",
    "--lora_r", "64",
    "--lora_alpha", "128",
    "--lora_dropout", "0.05",
    "--target_modules", LORA_TARGETS,
    "--learning_rate", "3e-3",
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


def lmi_values() -> dict:
    """serving.lmi of config/dev.yaml, with the tiny model's DEMO_LMI on top."""
    values: dict = {}
    try:
        import yaml

        serving = yaml.safe_load((ROOT / "config" / "dev.yaml").read_text(encoding="utf-8")).get("serving") or {}
        values = dict(serving.get("lmi") or {})
    except (OSError, ImportError, AttributeError):
        pass
    values.update(DEMO_LMI)
    return values


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


def serve_and_ask(
    model_dir: Path, properties: Path, work: Path, label: str, prompts: list[str], max_new_tokens: int
) -> tuple[list[dict], dict[str, float]]:
    """Start the LMI-contract server on model_dir, send each prompt once, stop it; the answers and timings."""
    port_file = work / f"server-{label}.port"
    port_file.unlink(missing_ok=True)
    log = (work / f"server-{label}.log").open("w")
    argv = [sys.executable, str(SERVER), "--model-dir", str(model_dir), "--properties", str(properties)]
    argv += ["--port", "0", "--port-file", str(port_file)]
    print(f"== serve {label}: local/servers/llm_endpoint --model-dir {model_dir} --properties {properties}", flush=True)
    started = time.perf_counter()
    server = subprocess.Popen(argv, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT)
    try:
        url = _wait_ready(server, port_file, timeout=600)
        loaded = time.perf_counter() - started
        answers, sent = [], time.perf_counter()
        for prompt in prompts:
            fitting = min(max_new_tokens, int(DEMO_LMI["n_positions"]) - prompt_tokens(model_dir, prompt))
            parameters = {**SAMPLE_PARAMETERS, "max_new_tokens": fitting, "details": True}
            payload = {"inputs": prompt, "parameters": parameters}
            print(f"== invoke {label}: POST {url}/invocations {json.dumps(payload)[:160]}...", flush=True)
            status, answer = _post(url + "/invocations", payload)
            if status != 200:
                raise SystemExit(f"demo: the server answered {status}: {answer}")
            answers.append(answer)
        return answers, {"load until /ping": loaded, f"{len(prompts)} invocations": time.perf_counter() - sent}
    finally:
        server.terminate()
        try:
            server.wait(timeout=15)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait(timeout=15)
        log.close()


def words(text: str) -> list[str]:
    return re.findall(r"[a-z0-9]+(?:[-'][a-z0-9]+)*", text.lower())


def question_of(instruction: str) -> str:
    """The question without the Llama 2 markers and the <<SYS>> block."""
    text = instruction.split("<</SYS>>")[-1]
    return text.replace("<s>", "").replace("[INST]", "").replace("[/INST]", "").strip()


def closest_row(question: str, rows: list[dict]) -> dict:
    """The dataset row whose question shares the most words with this one (Jaccard; the first on a tie)."""
    asked = set(words(question))

    def similarity(row: dict) -> float:
        theirs = set(words(question_of(row["instruction"])))
        return len(asked & theirs) / max(1, len(asked | theirs))

    return max(rows, key=similarity)


def answer_overlap(answer: str, reference: str) -> float:
    """Word-set F1 of an answer against a reference answer: 1.0 says the same words, 0.0 none of them."""
    said, wanted = set(words(answer)), set(words(reference))
    common = len(said & wanted)
    if not common:
        return 0.0
    precision, recall = common / len(said), common / len(wanted)
    return 2 * precision * recall / (precision + recall)


def read_rows(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def pretrained_base(cache: Path, steps: int, timings: dict[str, float]) -> Path:
    """The cached pretrained base of finetune/pretrain.py, built on first use."""
    sys.path.insert(0, str(QLORA))
    from finetune.pretrain import PretrainSettings, ensure_pretrained_base

    started = time.perf_counter()
    print(
        f"== pretrained base: finetune.pretrain.ensure_pretrained_base({cache}) ({steps} steps unless cached)",
        flush=True,
    )
    base = ensure_pretrained_base(cache, settings=PretrainSettings(steps=steps))
    timings["pretrained base"] = time.perf_counter() - started
    report = json.loads((base / "pretrain_report.json").read_text(encoding="utf-8"))
    print(
        f"   {base}: {report['parameters']} parameters, {report['steps']} steps in {report['train_seconds']} s, "
        f"held-out corpus loss {report['eval_loss_before']} -> {report['eval_loss_after']}",
        flush=True,
    )
    return base


def show_answers(prompts: list[str], answers: dict[str, list[dict]], reference: dict, report: dict) -> None:
    closest = question_of(reference["instruction"])
    print(f"\n== the dataset's answer to the question closest to the seed's ({closest!r})")
    print(reference["response"])
    for index, prompt in enumerate(prompts):
        print(f"\n== prompt {index + 1}\n{prompt}")
        for label, per_prompt in answers.items():
            answer = per_prompt[index]
            details = answer.get("details", {})
            print(
                f"-- {label} answer (greedy; word overlap with the dataset's answer {answer['overlap']:.2f}; "
                f"finish_reason {details.get('finish_reason')}, {details.get('generated_tokens')} tokens)"
            )
            print(answer.get("generated_text", "").strip() or "(empty)")
    curve = [point["loss"] for point in (report.get("loss_curve") or {}).get("train", [])]
    loss = (report.get("train_metrics") or {}).get("train_loss")
    if curve:
        print(f"\nQLoRA train_loss {curve[0]:.2f} -> {curve[-1]:.2f} (mean {loss:.2f})")


def _show_timings(timings: dict[str, float], report: dict) -> None:
    print("\n== timings")
    for step, seconds in timings.items():
        print(f"{step:<36}{seconds:8.1f} s")
        if step.startswith("qlora"):
            for phase, phase_seconds in (report.get("durations_seconds") or {}).items():
                print(f"  {phase:<34}{phase_seconds:8.1f} s")


def ask_both(
    base: Path, fine_tuned: Path, work: Path, data: Path, max_new_tokens: int, timings: dict[str, float]
) -> tuple[list[str], dict[str, list[dict]], dict]:
    """(prompts, answers per model, the dataset row closest to the seed's question): the base and then the
    fine-tuned model, each served by the LMI-contract server with the same serving.properties."""
    properties = work / "serving.properties"
    properties.write_text(render_properties(PROPERTIES_TEMPLATE, lmi_values()))
    reference = closest_row(question_of(SAMPLE_PROMPT), read_rows(data))
    # The seed's prompt (a paraphrase, with a system prompt), then the dataset's own question in the same format.
    prompts = [SAMPLE_PROMPT, f"<s>[INST] {reference['instruction']} [/INST]"]
    answers = {}
    for label, model_dir in (("base", base), ("fine-tuned", fine_tuned)):
        answers[label], served = serve_and_ask(model_dir, properties, work, label, prompts, max_new_tokens)
        for answer in answers[label]:
            answer["overlap"] = answer_overlap(answer.get("generated_text", ""), reference["response"])
        timings.update({f"serve {label} ({phase})": seconds for phase, seconds in served.items()})
    return prompts, answers, reference


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workdir", default=str(ROOT / "build" / "demo"), help="wiped and rebuilt on every run")
    parser.add_argument("--cache", default=str(ROOT / "build" / "pretrained"), help="pretrained bases, kept")
    parser.add_argument("--data", default=str(DATA), help="instruction JSONL to fine-tune on")
    parser.add_argument("--pretrain-steps", type=int, default=300, help="full-training steps of the base")
    parser.add_argument("--max-steps", type=int, default=300, help="QLoRA optimizer steps")
    parser.add_argument(
        "--max-new-tokens", type=int, default=80, help="the sample's max_new_tokens, capped to fit n_positions"
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

    base = pretrained_base(Path(args.cache).resolve(), args.pretrain_steps, timings)
    trained = work / "train"
    _run(
        "qlora train + merge",
        [sys.executable, str(QLORA / "train.py"), "--model_id", str(base), "--train_data", args.data,
         "--output_dir", str(trained), "--max_steps", str(args.max_steps), *TRAIN_FLAGS],
        timings,
        quiet,
    )  # fmt: skip
    report = json.loads((trained / "training_report.json").read_text(encoding="utf-8"))

    prompts, answers, reference = ask_both(base, trained / "model", work, Path(args.data), args.max_new_tokens, timings)
    timings["total"] = time.perf_counter() - total

    show_answers(prompts, answers, reference, report)
    _show_timings(timings, report)
    result = {
        "prompts": prompts,
        "answers": answers,
        "reference": reference,
        "timings": timings,
        "base_model": str(base),
    }
    (work / "demo_result.json").write_text(json.dumps(result, indent=2))
    return result


if __name__ == "__main__":
    main()
