"""Which GPU training type holds a base model's QLoRA run and its merge, on paper (standard library).

The rule (the project's estimate; each term's source beside it). A type fits when
- each GPU holds the whole run (one GPU, or DDP's copy per GPU; FSDP's sharding is not assumed):
  * the 4-bit linear layers: 4 bits per parameter plus the quantization constants, 0.127 bits per parameter with
    double quantization and 0.5 without (Dettmers et al. 2023, "QLoRA", section 3: blocks of 64, 8-bit constants
    of 256-blocks); every parameter but the embeddings is in a quantized linear layer (norms are negligible);
  * the input embedding and an untied output head in float32: bitsandbytes quantizes nn.Linear layers only,
    transformers leaves the output head out, and peft's prepare_model_for_kbit_training upcasts what is not
    quantized to float32 (training_code/qlora/finetune/model.py);
  * LoRA: r x (inputs + outputs) of every targeted projection (`auto`: every linear layer of each decoder layer,
    as train.py resolves it; lm_head when named), each in float32 with its gradient and AdamW's two moments:
    16 bytes per LoRA parameter;
  * activations of per_device_batch_size x max_seq_length tokens: with gradient checkpointing (train.py's
    default) each layer's 16-bit input plus one layer recomputed at a time, 34 bytes per token and hidden unit
    (Korthikanti et al. 2022, "Reducing Activation Recomputation in Large Transformer Models", equation 1 without
    the attention-score term, which SDPA does not keep), without it 34 bytes for every layer; the logits in 16 bits,
    their float32 copy for the loss and its gradient: 10 bytes per token and vocabulary entry;
  * 2 GiB for the CUDA context, cuBLAS workspaces and the allocator's slack (a project allowance);
- its host RAM holds twice the merge's base (the base reloaded in merge_dtype, merge.py load_full_precision): the
  reference point is the seed recipe's, /work/shared/REFERENCE.md: "The seed's QLoRA recipe targets ml.g5.2xlarge
  (24 GB A10G, 32 GB host RAM); a 7B fp16 merge (13.5 GB) fits" (2 x 12.6 GiB <= 32 GiB), and twice leaves room for
  the safetensors shards being read and written beside the tensors.
By this rule Llama-2-7B at the seed's batch 4 x 512 tokens, r 64, needs ~9.9 GiB per GPU and 25.1 GiB of host RAM:
ml.g5.2xlarge, the seed's type.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from .base_model_record import BaseModelRecord
from .hosts import TRAINING_HOSTS

GIB = 1024**3
NF4_BITS = 4
CONSTANT_BITS = {True: 0.127, False: 0.5}  # double quantization on / off
UNQUANTIZED_BYTES = 4
LORA_STATE_BYTES = 16
CHECKPOINTED_LAYER_BYTES = 34
LOGIT_BYTES = 10
CUDA_ALLOWANCE_GIB = 2.0
HOST_COPIES = 2
MERGE_DTYPE_BYTES = {"float16": 2, "bfloat16": 2, "float32": 4}
PROJECTIONS = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")


@dataclass(frozen=True)
class QloraNeed:
    """What one run needs: GiB on each GPU, GiB of host RAM (the merge)."""

    gpu_gib: float
    host_gib: float


def _projections(record: BaseModelRecord) -> dict[str, tuple[int, int]]:
    """(inputs, outputs) of each linear layer of one decoder layer, and of the output head."""
    h, inter = record.hidden_size, record.intermediate_size
    q, kv = record.num_attention_heads * record.head_dim, record.num_key_value_heads * record.head_dim
    shapes = (h, q), (h, kv), (h, kv), (q, h), (h, inter), (h, inter), (inter, h)
    return {**dict(zip(PROJECTIONS, shapes, strict=True)), "lm_head": (h, record.vocab_size)}


def lora_parameters(record: BaseModelRecord, r: int, target_modules: str) -> int:
    """Trainable LoRA parameters: r x (inputs + outputs) per targeted projection and decoder layer."""
    shapes = _projections(record)
    names = PROJECTIONS if target_modules.strip().lower() in ("auto", "all-linear", "") else target_modules.split(",")
    total = 0
    for name in (n.strip() for n in names):
        if name in shapes:
            per = r * sum(shapes[name])
            total += per if name == "lm_head" else per * record.num_hidden_layers
    return total


def qlora_need(record: BaseModelRecord, hyperparameters: Mapping[str, str]) -> QloraNeed:
    """The rule's figures for `record` trained with `hyperparameters` (strings, as the job gets them)."""
    from ..code_contract.qlora import hyperparameter_defaults, parse_bool

    hp = {**hyperparameter_defaults(), **hyperparameters}
    tokens = int(hp["per_device_batch_size"]) * int(hp["max_seq_length"])
    embeddings = record.vocab_size * record.hidden_size * (1 if record.tie_word_embeddings else 2)
    quantized = max(record.parameters - embeddings, 0)
    weights = (
        quantized * (NF4_BITS + CONSTANT_BITS[parse_bool(hp["double_quant"])]) / 8 + embeddings * UNQUANTIZED_BYTES
    )
    lora = lora_parameters(record, int(hp["lora_r"]), hp["target_modules"]) * LORA_STATE_BYTES
    layers = record.num_hidden_layers
    if parse_bool(hp["gradient_checkpointing"]):
        kept = layers * 2 * tokens * record.hidden_size + CHECKPOINTED_LAYER_BYTES * tokens * record.hidden_size
    else:
        kept = layers * CHECKPOINTED_LAYER_BYTES * tokens * record.hidden_size
    logits = LOGIT_BYTES * tokens * record.vocab_size
    gpu = (weights + lora + kept + logits) / GIB + CUDA_ALLOWANCE_GIB
    host = HOST_COPIES * record.parameters * MERGE_DTYPE_BYTES[hp["merge_dtype"]] / GIB
    return QloraNeed(gpu_gib=gpu, host_gib=host)


def cheapest_fit(need: QloraNeed, prices: Mapping[str, float]) -> str | None:
    """The cheapest priced GPU training type that holds `need`, or None."""
    fitting = [
        (price, name)
        for name, price in prices.items()
        if (host := TRAINING_HOSTS.get(name)) is not None
        and host.gpus
        and host.gpu_memory_gib >= need.gpu_gib
        and host.host_memory_gib >= need.host_gib
    ]
    return min(fitting)[1] if fitting else None
