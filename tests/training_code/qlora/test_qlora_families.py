"""The tiny model of each family a user brings keeps what tells it apart, and QLoRA finds its targets on each;
a head tied to the embedding is trained as one LoRA on the shared weight and merged into it once."""

from __future__ import annotations

import copy

import pytest
import torch
from finetune.families import FAMILIES, tiny_family_config
from finetune.model import BNB_CPU_BLOCK, ModelShapeError, attach_lora, resolve_target_modules, tied_targets
from qlora_test_helpers import run_config, vocab_texts

LLAMA_TARGETS = "q_proj,k_proj,v_proj,o_proj,gate_proj,up_proj,down_proj,lm_head"  # config/local.yaml's


@pytest.fixture(scope="module")
def family_tokenizer():
    from finetune.tiny import TINY_CHAT_TEMPLATE, train_tokenizer

    return train_tokenizer(vocab_texts(), vocab_size=320, chat_template=TINY_CHAT_TEMPLATE)


@pytest.fixture(scope="module")
def models(family_tokenizer) -> dict:
    """Each family's tiny model, random-init as finetune.families builds it (a few hundred thousand weights)."""
    from transformers import AutoModelForCausalLM

    torch.manual_seed(0)
    return {name: AutoModelForCausalLM.from_config(tiny_family_config(name, family_tokenizer)) for name in FAMILIES}


def _attention(model):
    return model.model.layers[0].self_attn


def test_each_family_keeps_its_distinguishing_shape(models):
    config = {name: model.config for name, model in models.items()}
    assert config["llama3"].rope_parameters["rope_type"] == config["llama3.2"].rope_parameters["rope_type"] == "llama3"
    assert config["llama3"].num_key_value_heads < config["llama3"].num_attention_heads  # GQA
    assert _attention(models["qwen3"]).q_norm is not None and _attention(models["qwen3"]).k_norm is not None
    qwen3 = config["qwen3"]
    assert qwen3.head_dim * qwen3.num_attention_heads != qwen3.hidden_size  # head size is its own field
    assert config["mistral"].sliding_window == 16
    phi3 = _attention(models["phi3"])
    assert phi3.qkv_proj.out_features == 3 * config["phi3"].hidden_size  # q, k and v of every head in one matmul
    assert models["phi3"].model.layers[0].mlp.gate_up_proj.out_features == 2 * config["phi3"].intermediate_size
    assert config["granite"].logits_scaling == 16.0 and config["granite"].residual_multiplier == 0.22
    assert config["smollm3"].no_rope_layers == [1, 0]  # the second layer attends without rotary positions
    tied = {name for name, model in models.items() if model.lm_head.weight is model.model.embed_tokens.weight}
    assert tied == {"llama3.2", "qwen3", "granite", "smollm3"}


def test_every_layer_that_4bit_quantizes_fits_the_cpu_kernels_block(models):
    for name, model in models.items():
        head = model.get_output_embeddings()
        linear = [m for m in model.modules() if isinstance(m, torch.nn.Linear) and m is not head]
        assert linear and all(m.in_features % BNB_CPU_BLOCK == 0 for m in linear), name


def test_auto_targets_are_what_peft_calls_all_linear_on_every_family(models):
    from peft import LoraConfig, get_peft_model

    for name, model in models.items():
        resolved = resolve_target_modules(model, "auto")
        peft_model = get_peft_model(copy.deepcopy(model), LoraConfig(target_modules="all-linear"))
        assert sorted(resolved) == sorted({key.rsplit(".", 1)[-1] for key in peft_model.targeted_module_names}), name
    assert sorted(resolve_target_modules(models["phi3"], "auto")) == ["down_proj", "gate_up_proj", "o_proj", "qkv_proj"]


def test_auto_followed_by_the_head_adds_the_head(models):
    assert resolve_target_modules(models["phi3"], "auto,lm_head")[-1] == "lm_head"
    assert resolve_target_modules(models["llama3"], "all-linear, lm_head") == [
        *resolve_target_modules(models["llama3"], "auto"),
        "lm_head",
    ]


def test_a_llama_target_list_on_phi3_is_refused_in_one_line(models):
    with pytest.raises(ModelShapeError) as raised:
        resolve_target_modules(models["phi3"], LLAMA_TARGETS)
    assert str(raised.value) == (
        "--target_modules: q_proj, k_proj, v_proj, gate_proj, up_proj name no layer of Phi3ForCausalLM, whose linear "
        "layers are down_proj, gate_up_proj, o_proj, qkv_proj and the head lm_head; pass auto (every linear layer) "
        "or auto,lm_head"
    )


def test_only_a_tied_head_or_embedding_is_a_tied_target(models):
    assert tied_targets(models["qwen3"], ["q_proj", "lm_head"]) == ["lm_head"]
    assert tied_targets(models["granite"], ["model.embed_tokens"]) == ["model.embed_tokens"]
    assert tied_targets(models["llama3"], ["q_proj", "lm_head"]) == []  # untied: the head trains on its own


@pytest.fixture(scope="module")
def tied_adapter(models, tmp_path_factory):
    """A tiny Qwen3 (tied head) with a LoRA on q_proj and the head through attach_lora, every factor random so the
    delta is not zero, saved as train.py saves it."""
    folder = tmp_path_factory.mktemp("tied")
    base = models["qwen3"]
    base.save_pretrained(folder / "base")
    adapted = attach_lora(type(base).from_pretrained(folder / "base"), ["q_proj", "lm_head"], run_config(folder))
    torch.manual_seed(1)
    with torch.no_grad():
        for name, parameter in adapted.named_parameters():
            if "lora_" in name:
                parameter.normal_(0, 0.05)
    adapted.save_pretrained(folder / "adapter")
    return folder


def _probe(models) -> dict:
    ids = torch.randint(3, models["qwen3"].config.vocab_size, (2, 12), generator=torch.Generator().manual_seed(0))
    return {"input_ids": ids, "attention_mask": torch.ones_like(ids)}


def test_peft_alone_adds_a_tied_heads_delta_twice(tied_adapter, models):
    """Why merge_adapter unloads the tied head first: peft 0.21.2 merges the head's copy of the embedding's delta
    into the weight they share, on top of the embedding's own."""
    from finetune.merge import compare_logits, load_full_precision, probe_logits
    from peft import PeftModel

    adapted = PeftModel.from_pretrained(
        load_full_precision(str(tied_adapter / "base"), "float32"), tied_adapter / "adapter"
    )
    batch = _probe(models)
    unmerged = probe_logits(adapted, batch)
    merged = probe_logits(adapted.merge_and_unload(), batch)
    assert compare_logits(unmerged, merged, "float32", None).relative_diff > 0.1


@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_a_tied_head_lora_merges_into_the_shared_weight_once(tied_adapter, models, dtype):
    """float16: loading casts each LoRA factor to float32 on its own, so the head's and the embedding's factors are
    equal in value but no longer one tensor."""
    from finetune.merge import load_full_precision, merge_adapter

    base = load_full_precision(str(tied_adapter / "base"), dtype)
    merged, check, _ = merge_adapter(base, str(tied_adapter / "adapter"), dtype, _probe(models), None)
    assert check.passed and check.relative_diff <= check.relative_tolerance
    assert merged.config.tie_word_embeddings and merged.lm_head.weight is merged.model.embed_tokens.weight
    assert not torch.equal(merged.model.embed_tokens.weight.float(), models["qwen3"].model.embed_tokens.weight)
