"""4-bit loading and LoRA target detection on the tiny Llama."""

from __future__ import annotations

import bitsandbytes as bnb
import pytest
import torch
from finetune.model import (
    linear_module_names,
    load_base_model,
    parameter_counts,
    quantization_config,
    resolve_target_modules,
)
from finetune.trainer import precision_flags, resolve_optimizer
from qlora_test_helpers import run_config

LLAMA_LINEAR_LAYERS = ["down_proj", "gate_proj", "k_proj", "o_proj", "q_proj", "up_proj", "v_proj"]


@pytest.fixture(scope="module")
def quantized(tiny_llama):
    return load_base_model(run_config(tiny_llama, gradient_checkpointing=True, packing=False))


def test_quantization_config_follows_the_flags():
    default = quantization_config("bfloat16", True)
    seed = quantization_config("float16", False)
    assert default.load_in_4bit and default.bnb_4bit_quant_type == "nf4" and default.bnb_4bit_use_double_quant
    assert default.bnb_4bit_compute_dtype == torch.bfloat16
    assert seed.bnb_4bit_compute_dtype == torch.float16 and not seed.bnb_4bit_use_double_quant


def test_base_is_loaded_in_4bit_ready_for_kbit_training(quantized):
    layer = quantized.model.layers[0]
    assert isinstance(layer.self_attn.q_proj, bnb.nn.Linear4bit)
    assert layer.self_attn.q_proj.weight.quant_type == "nf4"
    assert not isinstance(quantized.lm_head, bnb.nn.Linear4bit)
    assert quantized.is_gradient_checkpointing and not quantized.config.use_cache
    assert not any(p.requires_grad for p in quantized.parameters())  # frozen until LoRA is attached


def test_auto_targets_are_every_linear_layer_but_the_output_head(quantized):
    assert linear_module_names(quantized) == LLAMA_LINEAR_LAYERS
    assert resolve_target_modules(quantized, "auto") == LLAMA_LINEAR_LAYERS
    assert resolve_target_modules(quantized, "q_proj, v_proj") == ["q_proj", "v_proj"]


def test_four_bit_weights_count_two_parameters_per_stored_byte(quantized, tiny_llama):
    from transformers import AutoModelForCausalLM

    full_precision = AutoModelForCausalLM.from_pretrained(tiny_llama)
    counts = parameter_counts(quantized)
    assert counts["total"] == sum(p.numel() for p in full_precision.parameters()) and counts["trainable"] == 0
    assert quantized.get_memory_footprint() < 0.6 * full_precision.get_memory_footprint()


def test_cpu_gets_a_working_optimizer_and_no_fp16_autocast():
    if torch.cuda.is_available():
        pytest.skip("CPU-only expectations")
    assert resolve_optimizer("auto") == "adamw_torch" and resolve_optimizer("adafactor") == "adafactor"
    assert precision_flags("float16") == {"bf16": False, "fp16": False, "use_cpu": True}
    assert precision_flags("bfloat16")["bf16"]


def test_quantized_linear_weights_take_about_a_quarter_of_bf16(quantized, tiny_llama):
    from finetune.model import linear_weight_bytes
    from transformers import AutoModelForCausalLM

    bf16 = AutoModelForCausalLM.from_pretrained(tiny_llama, dtype=torch.bfloat16)
    ratio = linear_weight_bytes(quantized) / linear_weight_bytes(bf16)
    # 4 bits + absmax constants against 16 bits; the fixed 1 KiB lookup table per tensor weighs on tiny layers
    assert 0.25 < ratio < 0.4, ratio


def test_a_layer_the_cpu_kernels_cannot_quantize_is_named_before_loading(tmp_path):
    from finetune.model import ModelShapeError, check_4bit_shapes
    from finetune.tiny import build_tiny_llama
    from qlora_test_helpers import vocab_texts

    odd = build_tiny_llama(tmp_path / "odd", vocab_texts(), vocab_size=320, hidden_size=96, num_heads=4)
    check_4bit_shapes(str(odd), gpu=True)  # GPU kernels take any shape
    with pytest.raises(ModelShapeError, match=r"^layer model.layers.0.self_attn.q_proj: in_features 96"):
        check_4bit_shapes(str(odd), gpu=False)
