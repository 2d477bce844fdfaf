"""A merged model folder as train.py leaves it for the registry, without torch: config.json, tokenizer_config.json
and a safetensors file written here, and model_facts.json written from them by train.py's own facts module
(training_code/qlora/finetune/facts.py), so the registry tests read the file the training code writes."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import numpy as np
from safetensors.numpy import save_file

from stacks.code_contract.loader import load_code_module
from stacks.paths import QLORA_CODE

CONFIG = {  # a Llama with grouped-query attention, as transformers writes config.json
    "architectures": ["LlamaForCausalLM"],
    "model_type": "llama",
    "hidden_size": 8,
    "intermediate_size": 16,
    "num_hidden_layers": 1,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "max_position_embeddings": 4096,
    "vocab_size": 32,
    "tie_word_embeddings": False,
    "torch_dtype": "float16",
}


def write_model_folder(folder: Path, base_model: str) -> dict:
    """The folder's files and its model_facts.json; returns the facts."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_text(json.dumps(CONFIG))
    (folder / "tokenizer_config.json").write_text(json.dumps({"chat_template": "{{ messages }}"}))
    shapes = {
        "model.embed_tokens.weight": (32, 8),
        "model.layers.0.self_attn.q_proj.weight": (8, 8),
        "model.layers.0.self_attn.k_proj.weight": (4, 8),
        "model.layers.0.mlp.up_proj.weight": (16, 8),
        "model.norm.weight": (8,),
        "lm_head.weight": (32, 8),
    }
    save_file({name: np.zeros(shape, dtype=np.float16) for name, shape in shapes.items()}, folder / "model.safetensors")
    return load_code_module(QLORA_CODE, "finetune/facts.py").write_model_facts(folder, base_model)


def model_facts_body(base_model: str) -> bytes:
    """model_facts.json of such a folder, as the job uploads it."""
    with tempfile.TemporaryDirectory() as folder:
        write_model_folder(Path(folder), base_model)
        return (Path(folder) / "model_facts.json").read_bytes()
