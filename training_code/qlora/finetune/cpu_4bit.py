"""bitsandbytes' 4-bit layers kept in their training layout on CPU through every evaluation.

This module is the one place that works around bitsandbytes here. In bitsandbytes 0.50.2
(bitsandbytes/nn/modules.py, Linear4bit.forward), a 4-bit layer that runs on a CPU with AVX512-BF16 in eval mode
on an input that needs no gradient (any evaluation: eval mode under no_grad) converts its weight, for good, to a
bf16 layout made for inference (bitsandbytes/functional.py, _convert_weight_packed_for_cpu). From then on every
matmul of that layer, training steps included, runs gemv_4bit (bitsandbytes/autograd/_functions.py,
matmul_4bit): in bf16 whatever the compute dtype, and with no backward, so the gradient through the frozen base
is lost (PyTorch warns "an autograd kernel was not registered"). Converting back
(_convert_weight_packed_for_cpu_inverse, which Linear4bit's state_dict runs) does not give the loaded layer
again: its quantization constants went through bf16.

Neither bitsandbytes nor transformers has a setting for this. The conversion is gated on the layer's own
`support_avx512bf16_for_cpu`, which Linear4bit.__init__ sets from has_avx512bf16(); turning it off keeps each
layer as loaded, so an evaluation dequantizes in the compute dtype exactly as a training step does. GPU layers
never take that path. Should another bitsandbytes convert by some other route, TrainingLayoutGuard stops the
run in one line before a step on converted layers, rather than train on wrong gradients.
"""

from __future__ import annotations

import torch
from transformers import TrainerCallback, TrainerControl, TrainerState, TrainingArguments

CPU_INFERENCE_SWITCH = "support_avx512bf16_for_cpu"  # read by Linear4bit.forward before converting


class InferenceLayoutError(RuntimeError):
    """A training step would run on 4-bit layers converted for CPU inference; the message says what to pass."""


def four_bit_layers(model: torch.nn.Module) -> list[torch.nn.Module]:
    import bitsandbytes as bnb

    return [module for module in model.modules() if isinstance(module, bnb.nn.Linear4bit)]


def keep_training_layout(model: torch.nn.Module) -> int:
    """Turn off the CPU inference conversion of every 4-bit layer of `model`; returns how many layers."""
    layers = four_bit_layers(model)
    for layer in layers:
        setattr(layer, CPU_INFERENCE_SWITCH, False)
    return len(layers)


def converted_layers(model: torch.nn.Module) -> int:
    """How many 4-bit layers hold their weight in bitsandbytes' CPU inference layout.

    A sharded (FSDP) weight loses its quant_state; the layer keeps a copy, as Linear4bit.forward reads it.
    """
    converted = 0
    for layer in four_bit_layers(model):
        state = getattr(layer.weight, "quant_state", None) or getattr(layer, "quant_state", None)
        converted += bool(getattr(state, "packing_format_for_cpu", False))
    return converted


class TrainingLayoutGuard(TrainerCallback):
    """Stops the run before a training step on 4-bit layers that an evaluation converted for CPU inference."""

    def on_step_begin(
        self,
        args: TrainingArguments,
        state: TrainerState,
        control: TrainerControl,
        model: torch.nn.Module | None = None,
        **kwargs,
    ) -> None:
        converted = converted_layers(model) if model is not None else 0
        if converted:
            import bitsandbytes as bnb

            raise InferenceLayoutError(
                f"--eval_steps with --method qlora on CPU: bitsandbytes {bnb.__version__} converted {converted} "
                "4-bit layers to its bf16 CPU inference layout during an evaluation, which has no backward, so the "
                "next steps would train on wrong gradients; pass --eval_steps 0 (evaluate after training only) or "
                "--method lora, or train on a GPU"
            )
