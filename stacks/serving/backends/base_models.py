"""The base models the shipped serving profiles are built for: each one's config.json facts, by hub id.

Synth is offline, so what a training run's base model is cannot be read from the hub: these records are the
facts of the models the environments train (taken from each model's config.json; the parameter counts are
those transformers builds from it). `stacks/config/trained_model.py` checks an environment's training base
against its serving profile with them, the same checks the synth applies to a promoted version's facts.
Standard library only.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class BaseModel:
    """One base model: what serving needs to know before any version of it is trained."""

    hub_id: str
    family: str  # models that share a serving profile (size, heads, context), e.g. "llama-2-7b"
    model_type: str  # config.json model_type
    architecture: str  # config.json architectures[0]
    parameters: int | None  # None: the project's own tiny models, whose size follows their settings
    context_length: int  # max_position_embeddings
    num_attention_heads: int
    num_key_value_heads: int

    @property
    def key_folder(self) -> str:
        """Where training.base_model_key keeps a copy of it: base-models/<hub repository name, lower case>/."""
        return f"base-models/{self.hub_id.rsplit('/', 1)[-1].lower()}/"


BASE_MODELS = {
    model.hub_id: model
    for model in (
        BaseModel(
            "TinyLlama/TinyLlama-1.1B-Chat-v1.0",
            "tinyllama-1.1b",
            "llama",
            "LlamaForCausalLM",
            1_100_048_384,
            2048,
            32,
            4,
        ),
        BaseModel(
            "NousResearch/Llama-2-7b-chat-hf", "llama-2-7b", "llama", "LlamaForCausalLM", 6_738_415_616, 4096, 32, 32
        ),
        BaseModel(
            "meta-llama/Llama-2-7b-chat-hf", "llama-2-7b", "llama", "LlamaForCausalLM", 6_738_415_616, 4096, 32, 32
        ),
        BaseModel("Qwen/Qwen2.5-7B-Instruct", "qwen2.5-7b", "qwen2", "Qwen2ForCausalLM", 7_615_616_512, 32768, 28, 4),
        # training_code/qlora/finetune/pretrain.py's tiny Llama (the emulator's base, finetune/tiny.py's config:
        # 4 heads, 512 positions); its size follows its settings, so no count is recorded.
        BaseModel("tiny-pretrained", "tiny-llama", "llama", "LlamaForCausalLM", None, 512, 4, 4),
    )
}


def base_model_of(model_id: str | None, base_model_key: str | None) -> BaseModel | None:
    """The record of a training run's base: its hub id, else the one whose key_folder is base_model_key."""
    if model_id is not None and not model_id.startswith("/"):
        return BASE_MODELS.get(model_id)
    if base_model_key is not None:
        return next((m for m in BASE_MODELS.values() if m.key_folder == base_model_key), None)
    return None
