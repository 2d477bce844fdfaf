"""A tiny random-init Llama and a tokenizer trained offline, for tests and demos that may not use the hub.

CLI (in training_code/qlora): python -m finetune.tiny --out DIR --data FILE [--chat-template] [--family NAME]
`--family` builds another family's tiny model instead (finetune/families.py: llama3, qwen3, phi3, ...), with the
chat template its served model needs.
"""

from __future__ import annotations

import argparse
from collections.abc import Iterable
from pathlib import Path

from .tiny_tokenizer import BOS, EOS, TINY_CHAT_TEMPLATE, UNK, train_tokenizer

__all__ = ["BOS", "EOS", "TINY_CHAT_TEMPLATE", "UNK", "train_tokenizer"]


def tiny_llama_config(
    tokenizer,
    hidden_size: int = 64,
    num_layers: int = 2,
    num_heads: int = 4,
    intermediate_size: int = 128,
    max_position_embeddings: int = 512,
    model_vocab_size: int | None = None,
):
    """A small LlamaConfig sized to the tokenizer; keep hidden and intermediate sizes multiples of 64 (NF4 on CPU)."""
    from transformers import LlamaConfig

    return LlamaConfig(
        vocab_size=max(len(tokenizer), model_vocab_size or 0),
        hidden_size=hidden_size,
        intermediate_size=intermediate_size,
        num_hidden_layers=num_layers,
        num_attention_heads=num_heads,
        num_key_value_heads=num_heads,
        max_position_embeddings=max_position_embeddings,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        tie_word_embeddings=False,
    )


def build_tiny_llama(
    out_dir: str | Path,
    vocab_texts: Iterable[str],
    chat_template: bool | str = False,
    vocab_size: int = 512,
    hidden_size: int = 64,
    num_layers: int = 2,
    num_heads: int = 4,
    intermediate_size: int = 128,
    max_position_embeddings: int = 512,
    model_vocab_size: int | None = None,
    seed: int = 0,
) -> Path:
    """Train a tokenizer on vocab_texts, random-init a LlamaConfig model, save both; returns out_dir.

    chat_template: False for none (Llama 2 base style), True for TINY_CHAT_TEMPLATE, or a Jinja string.
    model_vocab_size: embedding rows, when larger than the tokenizer (e.g. Llama 2's 32000 for a benchmark).
    """
    import torch
    from transformers import LlamaForCausalLM

    template = TINY_CHAT_TEMPLATE if chat_template is True else (chat_template or None)
    tokenizer = train_tokenizer(vocab_texts, vocab_size=vocab_size, chat_template=template)
    config = tiny_llama_config(
        tokenizer, hidden_size, num_layers, num_heads, intermediate_size, max_position_embeddings, model_vocab_size
    )
    torch.manual_seed(seed)
    model = LlamaForCausalLM(config)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    return out


def texts_from_file(path: str) -> list[str]:
    """Every string value of every row, so the tokenizer sees both text and instruction data."""
    from .rows import read_rows

    return [value for row in read_rows(path) for value in row.fields.values() if isinstance(value, str)]


def main(argv: list[str] | None = None) -> None:
    from .families import FAMILIES, build_tiny_family

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, help="folder for the model and tokenizer")
    parser.add_argument("--data", required=True, help="training data whose strings the tokenizer learns from")
    parser.add_argument("--chat-template", action="store_true", help="give the tokenizer a chat template")
    parser.add_argument(
        "--family", choices=["llama", *FAMILIES], default="llama", help="llama: the small Llama 2 shape"
    )
    parser.add_argument("--vocab-size", type=int, default=512)
    parser.add_argument("--hidden-size", type=int, help="default: 64 (llama), 128 (the other families)")
    parser.add_argument("--layers", type=int, default=2)
    args = parser.parse_args(argv)
    texts = texts_from_file(args.data)
    if args.family != "llama":
        sizes = {"hidden_size": args.hidden_size} if args.hidden_size else {}
        out = build_tiny_family(
            args.out, args.family, texts, vocab_size=args.vocab_size, num_layers=args.layers, **sizes
        )
        print(f"tiny {args.family} ({FAMILIES[args.family].keeps}) saved to {out}")
        return
    out = build_tiny_llama(
        args.out,
        texts,
        chat_template=args.chat_template,
        vocab_size=args.vocab_size,
        hidden_size=args.hidden_size or 64,
        num_layers=args.layers,
    )
    print(f"tiny Llama saved to {out}")


if __name__ == "__main__":
    main()
