"""The settings of one run, typed and frozen: parsed once from the command line (finetune.args), then read by every
step (data, model, trainer, merge, evaluation, report). The defaults live in the parser, beside their help.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any


@dataclass(frozen=True, kw_only=True)
class TrainConfig:
    # paths
    model_id: str
    model_channel: str | None
    train_data: str
    eval_data: str | None
    output_dir: str
    model_dir: str
    checkpoint_dir: str
    # data
    eval_fraction: float
    min_eval_rows: int
    max_seq_length: int
    packing: bool
    pack_length: int | None  # None: finetune.data.auto_pack_length of the training examples
    group_by_length: bool
    train_on_inputs: bool
    truncation: str
    chat_template: str
    train_split: str
    train_files: str
    eval_split: str
    eval_files: str
    # training
    method: str
    epochs: float
    max_steps: int
    learning_rate: float
    per_device_batch_size: int
    gradient_accumulation_steps: int
    weight_decay: float
    max_grad_norm: float
    lr_scheduler_type: str
    warmup_ratio: float
    optim: str
    seed: int
    logging_steps: int
    save_steps: int
    save_total_limit: int
    eval_steps: int
    gradient_checkpointing: bool
    resume: bool
    early_stopping_patience: int
    load_best_model: bool
    # multi-GPU / multi-node
    fsdp: bool
    sagemaker_torch_distributed_enabled: bool
    # LoRA and quantization
    lora_r: int
    lora_alpha: int
    lora_dropout: float
    target_modules: str
    compute_dtype: str
    double_quant: bool
    quant_type: str
    # merge
    merge: bool
    merge_dtype: str
    merge_tolerance: float | None
    max_shard_size: str
    # held-out evaluation
    eval_generations: int
    eval_max_new_tokens: int

    def as_dict(self) -> dict[str, Any]:
        """The settings as the report records them (`arguments`)."""
        return asdict(self)
