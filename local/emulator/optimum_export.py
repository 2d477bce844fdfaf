"""Stand-in for the vLLM Neuron image's `optimum-cli export neuron`, where Neuron cannot run.

The job runner puts an `optimum-cli` that runs this module first on the PATH of the compile job's own command (`bash
-c '... optimum-cli export neuron "$@" ...' neuron-export <flags> <output>`,
stacks/serving/backends/vllm_neuronx/compile_step.py), so the job's real script runs around it. It reads the flags as
optimum-neuron 0.4.x's exporter does, refuses what the real exporter refuses before compiling (an architecture it has
no model class for, a TP degree that does not divide the attention heads, a flag it lacks), and writes the layout the
real export writes
(REFERENCE: config.json, neuron_config.json, checkpoint/weights/, the tokenizer):

    <output>/config.json            the model's config.json
    <output>/neuron_config.json     the compiled shape: batch_size, sequence_length, tp_degree, target
    <output>/checkpoint/weights/    here the model's own safetensors and a STAND-IN file saying so
    <output>/tokenizer*, chat_template.jinja

What it cannot do: compile (no neuronx-cc here), shard the weights per TP rank.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from pathlib import Path

from stacks.serving.backends import backend

BACKEND = "vllm_neuronx"  # whose image ships the exporter; its record lists the model types it loads
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "chat_template.jinja")
STAND_IN = "STAND-IN: the emulator's optimum-cli export neuron copied these weights; no NEFF was compiled.\n"


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="optimum-cli export neuron", exit_on_error=False)
    parser.add_argument("export")
    parser.add_argument("neuron")
    parser.add_argument("--model", required=True)
    parser.add_argument("--task", required=True, choices=("text-generation",))
    parser.add_argument("--batch_size", type=int, required=True)
    parser.add_argument("--sequence_length", type=int, required=True)
    parser.add_argument("--tensor_parallel_size", type=int, required=True)
    parser.add_argument("--instance_type", required=True, choices=("inf2", "trn1", "trn2"))
    parser.add_argument("output")
    return parser


def refusal(config: dict, args: argparse.Namespace) -> str | None:
    """What the exporter refuses before compiling, as one line; None when it would compile."""
    model_type = config.get("model_type")
    loads = backend(BACKEND).architectures
    if model_type not in loads:
        return f"model_type {model_type} is not supported by optimum-neuron's exporter ({', '.join(loads)})"
    heads = config.get("num_attention_heads", 0)
    if heads % args.tensor_parallel_size:
        return f"num_attention_heads {heads} is not divisible by tensor_parallel_size {args.tensor_parallel_size}"
    positions = config.get("max_position_embeddings", args.sequence_length)
    if args.sequence_length > positions:
        return f"sequence_length {args.sequence_length} exceeds max_position_embeddings {positions}"
    return None


def export(args: argparse.Namespace) -> Path:
    model, out = Path(args.model), Path(args.output)
    config = json.loads((model / "config.json").read_text(encoding="utf-8"))
    problem = refusal(config, args)
    if problem is not None:
        raise SystemExit(f"optimum-cli export neuron: {problem}")
    out.mkdir(parents=True, exist_ok=True)
    shutil.copy2(model / "config.json", out / "config.json")
    neuron = {
        "batch_size": args.batch_size,
        "sequence_length": args.sequence_length,
        "tp_degree": args.tensor_parallel_size,
        "target": args.instance_type,
        "torch_dtype": config.get("torch_dtype") or config.get("dtype"),
    }
    (out / "neuron_config.json").write_text(json.dumps(neuron, indent=2) + "\n", encoding="utf-8")
    weights = out / "checkpoint" / "weights"
    weights.mkdir(parents=True, exist_ok=True)
    for path in sorted(model.glob("*.safetensors")):
        shutil.copy2(path, weights / path.name)
    (weights / "STAND-IN").write_text(STAND_IN, encoding="utf-8")
    for name in TOKENIZER_FILES:
        if (model / name).is_file():
            shutil.copy2(model / name, out / name)
    return out


def main(argv: list[str] | None = None) -> int:
    try:
        args = _parser().parse_args(argv)
    except argparse.ArgumentError as err:
        print(f"optimum-cli export neuron: {err}", file=sys.stderr)
        return 2
    out = export(args)
    print(f"optimum-cli export neuron (stand-in): {args.model} -> {out}, shape {out / 'neuron_config.json'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
