"""A tiny *pretrained* Llama: about a minute of full causal-LM training on a general English corpus, cached.

LoRA adapters on a random-init frozen base cannot learn (the demo answered in byte soup), and no small causal
LM ships in any package here. So the demo and the local pipeline first build this base: a tokenizer trained
on the corpus plus the instruction data (so the fine-tune data tokenizes well), the tiny Llama of
finetune/tiny.py, and full (non-LoRA) training on the corpus only, so the fine-tune has something to add. The
folder is a normal Hugging Face model (safetensors + tokenizer, no chat template: train.py then renders the
data in the Llama 2 [INST] format the seed's prompt uses) that train.py loads with --model_id or from a
`model` channel.

    cd training_code/qlora && python -m finetune.pretrain --out DIR [--corpus data/corpus.txt]
        [--instructions data/instructions.jsonl] [--steps 300] [--seconds 60]

ensure_pretrained_base(cache_root) builds it under cache_root/<hash of corpus, settings and code> once; a
second call returns the cached folder at once.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import shutil
import time
from dataclasses import asdict, dataclass, replace
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[2]
DEFAULT_CORPUS = ROOT / "data" / "corpus.txt"
DEFAULT_INSTRUCTIONS = ROOT / "data" / "instructions.jsonl"
REPORT = "pretrain_report.json"
CODE = (HERE / "pretrain.py", HERE / "tiny.py")


@dataclass(frozen=True)
class PretrainSettings:
    """Model size and training budget; hidden and intermediate sizes stay multiples of 64 (NF4 on CPU)."""

    vocab_size: int = 1024
    hidden_size: int = 128
    num_layers: int = 4
    num_heads: int = 4
    intermediate_size: int = 256
    seq_len: int = 128
    batch_size: int = 16
    steps: int = 300
    learning_rate: float = 3e-3
    warmup_steps: int = 20
    eval_blocks: int = 32
    seed: int = 0


def corpus_paragraphs(corpus: Path) -> list[str]:
    """Paragraphs separated by blank lines; each becomes one <s> ... </s> document."""
    return [block.strip() for block in corpus.read_text(encoding="utf-8").split("\n\n") if block.strip()]


def instruction_texts(instructions: Path) -> list[str]:
    """Every string of every instruction row: seen by the tokenizer only, never trained on here."""
    from .tiny import texts_from_file

    return texts_from_file(str(instructions))


def token_blocks(tokenizer, paragraphs: list[str], seq_len: int):
    """The corpus as one stream of <s> paragraph </s> ids, cut into blocks of seq_len tokens."""
    import torch

    stream: list[int] = []
    for paragraph in paragraphs:
        stream += tokenizer(paragraph)["input_ids"] + [tokenizer.eos_token_id]  # the tokenizer adds <s>
    usable = len(stream) // seq_len * seq_len
    return torch.tensor(stream[:usable]).view(-1, seq_len)


def learning_rate(step: int, settings: PretrainSettings) -> float:
    """Linear warmup, then cosine decay to a tenth of the peak."""
    if step < settings.warmup_steps:
        return settings.learning_rate * (step + 1) / settings.warmup_steps
    progress = (step - settings.warmup_steps) / max(1, settings.steps - settings.warmup_steps)
    return settings.learning_rate * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * min(1.0, progress))))


def mean_loss(model, blocks) -> float:
    import torch

    with torch.no_grad():
        return float(model(input_ids=blocks, labels=blocks).loss)


def train(model, blocks, settings: PretrainSettings, max_seconds: float | None) -> dict:
    """Full training on random batches of blocks; eval_blocks evenly spread blocks are held out for the report."""
    import torch

    every = max(2, len(blocks) // settings.eval_blocks)
    is_held_out = torch.arange(len(blocks)) % every == every - 1
    held_out, train_blocks = blocks[is_held_out], blocks[~is_held_out]
    generator = torch.Generator().manual_seed(settings.seed)
    optimizer = torch.optim.AdamW(model.parameters(), lr=settings.learning_rate, weight_decay=0.01)
    model.eval()
    eval_before = mean_loss(model, held_out)
    model.train()
    losses, started, step = [], time.perf_counter(), 0
    for step in range(settings.steps):
        if max_seconds is not None and time.perf_counter() - started > max_seconds:
            break
        for group in optimizer.param_groups:
            group["lr"] = learning_rate(step, settings)
        batch = train_blocks[torch.randint(len(train_blocks), (settings.batch_size,), generator=generator)]
        loss = model(input_ids=batch, labels=batch).loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        losses.append(round(loss.item(), 4))
    else:
        step = settings.steps
    seconds = time.perf_counter() - started
    model.eval()
    return {
        "steps": step,
        "train_seconds": round(seconds, 2),
        "tokens_per_second": round(step * settings.batch_size * settings.seq_len / max(seconds, 1e-9), 1),
        "train_loss_first": losses[0] if losses else None,
        "train_loss_last10": round(sum(losses[-10:]) / len(losses[-10:]), 4) if losses else None,
        "eval_loss_before": round(eval_before, 4),
        "eval_loss_after": round(mean_loss(model, held_out), 4),
        "train_blocks": len(train_blocks),
        "loss_curve": losses[:: max(1, len(losses) // 30)],
    }


def pretrain(
    out_dir: Path,
    corpus: Path = DEFAULT_CORPUS,
    instructions: Path = DEFAULT_INSTRUCTIONS,
    settings: PretrainSettings = PretrainSettings(),
    max_seconds: float | None = None,
) -> dict:
    """Train the tokenizer and the model, save both and pretrain_report.json into out_dir; returns the report."""
    import torch
    from transformers import LlamaForCausalLM

    from .tiny import tiny_llama_config, train_tokenizer

    paragraphs = corpus_paragraphs(corpus)
    tokenizer = train_tokenizer(paragraphs + instruction_texts(instructions), vocab_size=settings.vocab_size)
    config = tiny_llama_config(
        tokenizer,
        settings.hidden_size,
        settings.num_layers,
        settings.num_heads,
        settings.intermediate_size,
        max_position_embeddings=512,
    )
    torch.manual_seed(settings.seed)
    model = LlamaForCausalLM(config)
    blocks = token_blocks(tokenizer, paragraphs, settings.seq_len)
    report = {
        "settings": asdict(settings),
        "corpus": str(corpus),
        "corpus_sha256": _sha256(corpus.read_bytes()),
        "corpus_tokens": blocks.numel(),
        "parameters": sum(p.numel() for p in model.parameters()),
        **train(model, blocks, settings, max_seconds),
    }
    out_dir.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out_dir, safe_serialization=True)
    tokenizer.save_pretrained(out_dir)
    (out_dir / REPORT).write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    return report


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def cache_key(corpus: Path, instructions: Path, settings: PretrainSettings) -> str:
    """Changes with the corpus, the tokenizer's instruction data, the settings or this code."""
    parts = [corpus.read_bytes(), instructions.read_bytes(), json.dumps(asdict(settings), sort_keys=True).encode()]
    parts += [path.read_bytes() for path in CODE]
    return _sha256(b"\0".join(_sha256(part).encode() for part in parts))[:16]


def ensure_pretrained_base(
    cache_root: Path,
    *,
    corpus: Path = DEFAULT_CORPUS,
    instructions: Path = DEFAULT_INSTRUCTIONS,
    settings: PretrainSettings = PretrainSettings(),
) -> Path:
    """The cached pretrained model folder for these inputs, built (into a temporary folder, then renamed) if missing."""
    folder = Path(cache_root) / f"pretrained-{cache_key(corpus, instructions, settings)}"
    if (folder / REPORT).is_file():
        return folder
    partial = folder.with_name(folder.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    pretrain(partial, corpus, instructions, settings)
    shutil.rmtree(folder, ignore_errors=True)
    partial.rename(folder)
    return folder


def main(argv: list[str] | None = None) -> dict:
    defaults = PretrainSettings()
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, help="folder for the model, tokenizer and pretrain_report.json")
    parser.add_argument("--corpus", default=str(DEFAULT_CORPUS), help="general text, paragraphs split by blank lines")
    parser.add_argument(
        "--instructions",
        default=str(DEFAULT_INSTRUCTIONS),
        help="instruction data the tokenizer also learns from (not trained on)",
    )
    parser.add_argument("--steps", type=int, default=defaults.steps, help="optimizer steps")
    parser.add_argument("--seconds", type=float, default=None, help="stop after this many seconds of training")
    parser.add_argument("--learning-rate", type=float, default=defaults.learning_rate)
    parser.add_argument("--seed", type=int, default=defaults.seed)
    args = parser.parse_args(argv)
    settings = replace(defaults, steps=args.steps, learning_rate=args.learning_rate, seed=args.seed)
    report = pretrain(Path(args.out), Path(args.corpus), Path(args.instructions), settings, args.seconds)
    print(
        f"pretrained {report['parameters']} parameters for {report['steps']} steps in "
        f"{report['train_seconds']} s: train loss {report['train_loss_first']} -> {report['train_loss_last10']}, "
        f"held-out loss {report['eval_loss_before']} -> {report['eval_loss_after']}; saved to {args.out}"
    )
    return report


if __name__ == "__main__":
    main()
