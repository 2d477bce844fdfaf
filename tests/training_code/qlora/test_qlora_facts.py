"""model_facts.json read from saved folders, checked against what transformers itself loads from them.

The expected values come from transformers (AutoConfig, the loaded model's parameters and dtype, the tokenizer's
chat template) and the file system, never from finetune.facts; the folders are tiny Llamas saved here, tied and
untied, sharded and single-file, with grouped-query attention and without.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from finetune.facts import FACT_TYPES, FACTS_FILE, ModelFactsError, model_facts, write_model_facts
from finetune.tiny import train_tokenizer
from qlora_test_helpers import vocab_texts


def _save_llama(folder: Path, *, dtype: torch.dtype, shard: str | None = None, chat: bool = False, **config) -> Path:
    from transformers import LlamaConfig, LlamaForCausalLM

    tokenizer = train_tokenizer(vocab_texts(), vocab_size=300, chat_template="{{ messages }}" if chat else None)
    settings = {
        "vocab_size": len(tokenizer),
        "hidden_size": 64,
        "intermediate_size": 128,
        "num_hidden_layers": 2,
        "num_attention_heads": 4,
        "max_position_embeddings": 256,
        **config,
    }
    torch.manual_seed(0)
    model = LlamaForCausalLM(LlamaConfig(**settings)).to(dtype)
    model.save_pretrained(folder, **({"max_shard_size": shard} if shard else {}))
    tokenizer.save_pretrained(folder)
    return folder


def _expected(folder: Path, base_model: str) -> dict:
    """The facts as transformers and the file system see the folder."""
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    config = AutoConfig.from_pretrained(folder)
    model = AutoModelForCausalLM.from_pretrained(folder, dtype="auto")
    return {
        "base_model": base_model,
        "model_type": config.model_type,
        "architecture": type(model).__name__,
        "parameters": sum(p.numel() for p in model.parameters()),  # shared (tied) tensors once
        "size_bytes": sum(p.stat().st_size for p in folder.glob("*.safetensors")),
        "dtype": str(next(model.parameters()).dtype).removeprefix("torch."),
        "context_length": config.max_position_embeddings,
        "num_attention_heads": config.num_attention_heads,
        "num_key_value_heads": config.num_key_value_heads,
        "chat_template": AutoTokenizer.from_pretrained(folder).chat_template is not None,
    }


@pytest.mark.parametrize(
    ("case", "dtype", "shard", "chat", "config"),
    [
        ("untied-fp16", torch.float16, None, False, {"tie_word_embeddings": False}),
        ("tied-bf16-sharded", torch.bfloat16, "60KB", True, {"tie_word_embeddings": True}),
        ("gqa-fp32", torch.float32, None, True, {"num_key_value_heads": 2, "tie_word_embeddings": False}),
    ],
)
def test_the_facts_are_what_transformers_loads_from_the_folder(tmp_path, case, dtype, shard, chat, config):
    folder = _save_llama(tmp_path / case, dtype=dtype, shard=shard, chat=chat, **config)
    if shard:
        assert (folder / "model.safetensors.index.json").is_file() and len(list(folder.glob("*.safetensors"))) > 1
    facts = write_model_facts(folder, "hub/tiny-base")
    assert json.loads((folder / FACTS_FILE).read_text()) == facts == _expected(folder, "hub/tiny-base")
    assert {key: type(value).__name__ for key, value in facts.items()} == FACT_TYPES


def test_a_checkpoint_storing_a_tied_output_embedding_counts_it_once(tmp_path):
    """A tied checkpoint written with lm_head.weight as well (some exporters do): torch shares the tensor."""
    from safetensors.torch import load_file, save_file

    folder = _save_llama(tmp_path / "tied", dtype=torch.float16, tie_word_embeddings=True)
    tensors = load_file(folder / "model.safetensors")
    assert "lm_head.weight" not in tensors
    tensors["lm_head.weight"] = tensors["model.embed_tokens.weight"].clone()
    save_file(tensors, folder / "model.safetensors", metadata={"format": "pt"})
    assert model_facts(folder, "b")["parameters"] == _expected(folder, "b")["parameters"]


def test_a_folder_without_config_or_weights_is_a_one_line_error(tmp_path):
    with pytest.raises(ModelFactsError, match=r"no config\.json$"):
        model_facts(tmp_path, "b")
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "llama", "architectures": ["LlamaForCausalLM"]}))
    with pytest.raises(ModelFactsError, match=r"no \*\.safetensors file and no model\.safetensors\.index\.json$"):
        model_facts(tmp_path, "b")
