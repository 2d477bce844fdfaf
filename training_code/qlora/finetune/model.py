"""Loading the base model (4-bit NF4, full precision, or for full fine-tuning) and attaching LoRA."""

from __future__ import annotations

from typing import Any

import torch

from .config import TrainConfig

DTYPES = {"bfloat16": torch.bfloat16, "float16": torch.float16, "float32": torch.float32}


BNB_CPU_BLOCK = 64  # bitsandbytes' CPU 4-bit kernels quantize rows in blocks of 64 input features
AUTO_TARGETS = ("auto", "all-linear")  # --target_modules words for every linear layer but the head


class ModelShapeError(ValueError):
    """A layer shape the chosen method cannot run; the message names the layer and the fix."""


def has_gpu() -> bool:
    return torch.cuda.is_available()


def quantization_config(compute_dtype: str, double_quant: bool, quant_type: str = "nf4", fsdp: bool = False):
    """NF4 settings; under FSDP the packed 4-bit weights are stored in the compute dtype so they can be sharded."""
    from transformers import BitsAndBytesConfig

    extra = {"bnb_4bit_quant_storage": DTYPES[compute_dtype]} if fsdp else {}
    return BitsAndBytesConfig(
        load_in_4bit=True,
        bnb_4bit_quant_type=quant_type,
        bnb_4bit_compute_dtype=DTYPES[compute_dtype],
        bnb_4bit_use_double_quant=double_quant,
        **extra,
    )


def check_4bit_shapes(model_id: str, gpu: bool) -> None:
    """Fail before loading when a layer to quantize cannot run on bitsandbytes' CPU kernels.

    Inside bitsandbytes the same case ends in `RuntimeError: shape '[96, 1]' is invalid for input of size ...`.
    The model is built on the meta device: no weights are read.
    """
    if gpu:
        return
    from accelerate import init_empty_weights
    from transformers import AutoConfig, AutoModelForCausalLM

    with init_empty_weights():
        model = AutoModelForCausalLM.from_config(AutoConfig.from_pretrained(model_id))
    head = model.get_output_embeddings()
    for name, module in model.named_modules():
        if isinstance(module, torch.nn.Linear) and module is not head and module.in_features % BNB_CPU_BLOCK:
            raise ModelShapeError(
                f"layer {name}: in_features {module.in_features} is not a multiple of {BNB_CPU_BLOCK}, which "
                "4-bit bitsandbytes needs on CPU; train on a GPU or pass --method lora"
            )


def load_tokenizer(model_id: str):
    """The model's tokenizer with a pad token (Llama has none: reuse EOS, as the seed did) padding right."""
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(model_id)
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    tokenizer.padding_side = "right"
    return tokenizer


def load_base_model(config: TrainConfig):
    """The base model ready for training: quantized and prepared for k-bit training when method is qlora.

    With packing, batches are packed rows, attended example by example (finetune.attention).
    """
    from transformers import AutoModelForCausalLM

    from .distributed import current_world, device_map

    model_id, method, compute_dtype, fsdp = config.model_id, config.method, config.compute_dtype, config.fsdp
    gradient_checkpointing = config.gradient_checkpointing
    kwargs: dict[str, Any] = {"device_map": device_map(current_world(), fsdp, has_gpu())}
    if config.packing:
        from .attention import register

        kwargs["attn_implementation"] = register()
    if method == "qlora":
        check_4bit_shapes(model_id, has_gpu())
        kwargs["quantization_config"] = quantization_config(compute_dtype, config.double_quant, config.quant_type, fsdp)
        kwargs["dtype"] = DTYPES[compute_dtype]
    elif method == "lora":
        # The frozen base in the compute dtype, as a 16-bit LoRA run would hold it; LoRA weights stay float32.
        kwargs["dtype"] = DTYPES[compute_dtype]
    else:
        # Trainable full-precision weights stay float32; the Trainer's autocast gives the compute dtype.
        kwargs["dtype"] = torch.float32
    model = AutoModelForCausalLM.from_pretrained(model_id, **kwargs)
    model.config.use_cache = False  # the cache is useless in training and clashes with checkpointing
    if method == "qlora":
        from peft import prepare_model_for_kbit_training

        from .cpu_4bit import keep_training_layout

        keep_training_layout(model)  # an evaluation must leave the layers as training needs them

        model = prepare_model_for_kbit_training(
            model,
            # FSDP checkpoints activations itself (fsdp_config), which avoids a second all-gather.
            use_gradient_checkpointing=gradient_checkpointing and not fsdp,
            gradient_checkpointing_kwargs={"use_reentrant": False},
        )
    elif gradient_checkpointing:
        model.activation_checkpointing_enable(activation_checkpointing_kwargs={"use_reentrant": False})
        if method == "lora":
            model.enable_input_require_grads()
    return model


def linear_module_names(model: torch.nn.Module) -> list[str]:
    """Leaf names of every linear layer (4-bit or not) except the output head, e.g. q_proj ... down_proj."""
    linear_types: tuple[type, ...] = (torch.nn.Linear,)
    try:
        import bitsandbytes as bnb

        linear_types += (bnb.nn.Linear4bit, bnb.nn.Linear8bitLt)
    except ImportError:  # pragma: no cover - bitsandbytes is pinned in requirements.txt
        pass
    head = model.get_output_embeddings()
    names = {
        name.rsplit(".", 1)[-1]
        for name, module in model.named_modules()
        if isinstance(module, linear_types) and module is not head
    }
    head_names = {name.rsplit(".", 1)[-1] for name, module in model.named_modules() if module is head}
    return sorted(names - head_names)


def _quant_state_bytes(weight) -> int:
    """Bytes of a 4-bit weight's quantization constants (absmax, and its own constants under double quant)."""
    state = getattr(weight, "quant_state", None)
    total = 0
    while state is not None:
        for name in ("absmax", "code", "offset"):
            tensor = getattr(state, name, None)
            if isinstance(tensor, torch.Tensor):
                total += tensor.numel() * tensor.element_size()
        state = getattr(state, "state2", None)
    return total


def linear_weight_bytes(model: torch.nn.Module) -> int:
    """Stored bytes of the linear layers that QLoRA quantizes (all but the output head), constants included.

    The honest 4-bit vs 16-bit comparison: embeddings and head stay unquantized (and prepare_model_for_kbit_
    training upcasts them to fp32), so whole-model footprints mix in what 4-bit never touches.
    """
    head = model.get_output_embeddings()
    total = 0
    for module in model.modules():
        if module is head or not isinstance(module, torch.nn.Linear):
            continue
        for parameter in module.parameters(recurse=False):
            total += parameter.numel() * parameter.element_size() + _quant_state_bytes(parameter)
    return total


def _head_name(model: torch.nn.Module) -> str:
    head = model.get_output_embeddings()
    return next((name.rsplit(".", 1)[-1] for name, module in model.named_modules() if module is head), "lm_head")


def resolve_target_modules(model: torch.nn.Module, requested: str) -> list[str]:
    """The LoRA targets: `auto` (or `all-linear`) is every linear layer but the output head, whatever the family
    calls them (Phi-3's fused qkv_proj and gate_up_proj); names may follow it (`auto,lm_head`), so one setting
    fits every family. A name that matches no layer is refused: peft only refuses when none matches, and a Llama
    list on Phi-3 would silently train o_proj and down_proj alone."""
    names = [name.strip() for name in requested.split(",") if name.strip()]
    linear = linear_module_names(model)
    if not names or names[0].lower() in AUTO_TARGETS:
        names = linear + [name for name in names[1:] if name not in linear]
    if not names:
        raise ValueError("no LoRA target modules found; pass --target_modules")
    modules = [name for name, _ in model.named_modules() if name]
    missing = [name for name in names if not any(m == name or m.endswith("." + name) for m in modules)]
    if missing:
        architecture = type(model).__name__
        raise ModelShapeError(
            f"--target_modules: {', '.join(missing)} name no layer of {architecture}, whose linear layers are "
            f"{', '.join(linear)} and the head {_head_name(model)}; pass auto (every linear layer) or "
            f"auto,{_head_name(model)}"
        )
    return names


def tied_targets(model: torch.nn.Module, target_modules: list[str]) -> list[str]:
    """The requested targets that are the output head or the input embedding, when the head's weight is the
    embedding's (Llama 3.2 1B/3B, Qwen3's small sizes, SmolLM3, Granite 3.x); [] for an untied model.

    A LoRA on one side of a tied pair changes a weight the other side reads too: trained apart, the merge of the
    head's delta into the shared weight also moves every input embedding, and the merged model answers differently
    from the adapter model it was checked against.
    """
    head, embedding = model.get_output_embeddings(), model.get_input_embeddings()
    if head is None or embedding is None or head.weight is not embedding.weight:
        return []
    tied = {name.rsplit(".", 1)[-1] for name, module in model.named_modules() if module is head or module is embedding}
    return [name for name in target_modules if name.rsplit(".", 1)[-1] in tied]


def tied_targets_line(tied: list[str]) -> str:
    """The line a run prints when tied_targets found the head or the embedding among the targets."""
    return (
        f"LoRA target {', '.join(tied)}: the output head shares the input embedding's weight; one LoRA on that "
        "shared weight serves both (peft ensure_weight_tying) and the merge adds it once"
    )


def attach_lora(model, target_modules: list[str], config: TrainConfig):
    """LoRA on target_modules; a tied head or embedding among them gets one adapter for the pair (tied_targets)."""
    from peft import LoraConfig, get_peft_model

    lora = LoraConfig(
        r=config.lora_r,
        lora_alpha=config.lora_alpha,
        lora_dropout=config.lora_dropout,
        bias="none",
        task_type="CAUSAL_LM",
        target_modules=target_modules,
        # peft puts the LoRA on the embedding and gives the head the same factors, transposed: the adapter model
        # is then a tied model whose shared weight moved by one delta, which a merge can reproduce exactly.
        ensure_weight_tying=bool(tied_targets(model, target_modules)),
    )
    return get_peft_model(model, lora)


def parameter_counts(model: torch.nn.Module) -> dict[str, int]:
    """Trainable and total parameters; a 4-bit weight packs two values per stored element, counted as two."""
    trainable = total = 0
    for parameter in model.parameters():
        count = parameter.numel()
        if parameter.__class__.__name__ == "Params4bit":
            count *= 2
        total += count
        if parameter.requires_grad:
            trainable += count
    return {"trainable": trainable, "total": total, "trainable_percent": round(100.0 * trainable / total, 4)}
