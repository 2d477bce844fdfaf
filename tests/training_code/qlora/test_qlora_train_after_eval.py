"""Training after an evaluation computes the same gradients as before it, and evaluation runs in the compute dtype.

An evaluation runs the model in eval mode without gradients. On a CPU with AVX512-BF16, bitsandbytes converts a
4-bit layer run that way to its bf16 inference layout, whose matmul has no backward; training steps after the
first evaluation would then follow wrong gradients, and every run with --eval_steps (so with early stopping or
best-checkpoint selection) would train on them.

Learning rate 0, so the weights never change and every step has the same batch (all training rows): the LoRA
gradients of the step after an evaluation must equal those of the step before it. Both must equal the gradient
of a plain transformers + PEFT model built without the trainer, each example run alone, token-weighted. The
reference runs in train mode with every dropout at 0: the same function as eval mode, and a mode in which
bitsandbytes keeps the 4-bit layers as loaded.
"""

from __future__ import annotations

import contextlib
import io
from dataclasses import dataclass, field

import pytest
import torch
from qlora_test_helpers import instruction_rows, load_train_entry, tiny_run_args, write_jsonl
from transformers import TrainerCallback

IGNORE = -100
ROWS = 24  # 8 held out, the rest trained on, all in one batch
LORA = {"r": 8, "lora_alpha": 16}  # as tiny_run_args sets them


@dataclass
class Fed:
    """What the trainer's model saw: LoRA weights and gradients at each optimizer step, the batches."""

    lora: dict[str, torch.Tensor] = field(default_factory=dict)
    gradients: list[dict[str, torch.Tensor]] = field(default_factory=list)
    train_batches: list[dict[str, torch.Tensor]] = field(default_factory=list)
    eval_batches: list[list[dict[str, torch.Tensor]]] = field(default_factory=list)
    pending_eval: list[dict[str, torch.Tensor]] = field(default_factory=list)


class Recorder(TrainerCallback):
    """Records the trainable parameters' gradients before each optimizer step and every batch fed to the model."""

    def __init__(self) -> None:
        self.fed = Fed()

    def _record_batch(self, module, args, kwargs) -> None:
        batch = {k: kwargs[k].detach().clone() for k in ("input_ids", "labels", "attention_mask") if k in kwargs}
        (self.fed.train_batches if module.training else self.fed.pending_eval).append(batch)

    def on_train_begin(self, args, state, control, model=None, **kwargs):
        model.register_forward_pre_hook(self._record_batch, with_kwargs=True)

    def on_pre_optimizer_step(self, args, state, control, model=None, **kwargs):
        trainable = {name: p for name, p in model.named_parameters() if p.requires_grad}
        if not self.fed.lora:
            self.fed.lora = {name: p.detach().clone() for name, p in trainable.items()}
        self.fed.gradients.append({name: p.grad.detach().clone() for name, p in trainable.items()})

    def on_evaluate(self, args, state, control, **kwargs):
        self.fed.eval_batches.append(self.fed.pending_eval)
        self.fed.pending_eval = []


def examples(batches: list[dict[str, torch.Tensor]]) -> list[tuple[torch.Tensor, torch.Tensor | None]]:
    """Each padded row's real tokens and labels (None where the model was fed none), alone."""
    found = []
    for batch in batches:
        for row in range(batch["input_ids"].shape[0]):
            length = int(batch["attention_mask"][row].sum())
            labels = batch.get("labels")
            assert labels is None or (labels[row, length:] == IGNORE).all()
            found.append((batch["input_ids"][row, :length], None if labels is None else labels[row, :length]))
    return found


def held_out_examples(argv: list[str], fed: list[dict[str, torch.Tensor]]) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """The run's held-out rows with their labels (an evaluation feeds the model none), in the order fed."""
    from finetune.args import parse_args
    from finetune.data import prepare_data
    from finetune.model import load_tokenizer
    from finetune.templates import resolve_chat_template

    config = parse_args(argv, env={})
    tokenizer = load_tokenizer(config.model_id)
    template, _ = resolve_chat_template(tokenizer, config.chat_template)
    rows = {tuple(row.input_ids): row.labels for row in prepare_data(tokenizer, config, template).eval_rows}
    fed_ids = [ids for ids, _ in examples(fed)]
    assert sorted(tuple(ids.tolist()) for ids in fed_ids) == sorted(rows)  # the evaluation saw every row once
    return [(ids, torch.tensor(rows[tuple(ids.tolist())])) for ids in fed_ids]


def plain_model(folder, method: str, lora: dict[str, torch.Tensor]):
    """The base as transformers loads it (4-bit NF4 with double quant for qlora), PEFT LoRA on every linear layer
    but the head, no dropout, holding the trainer's LoRA weights."""
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM, BitsAndBytesConfig

    kwargs = {"dtype": torch.float32}
    if method == "qlora":
        kwargs["quantization_config"] = BitsAndBytesConfig(
            load_in_4bit=True,
            bnb_4bit_quant_type="nf4",
            bnb_4bit_compute_dtype=torch.float32,
            bnb_4bit_use_double_quant=True,
        )
    base = AutoModelForCausalLM.from_pretrained(folder, **kwargs)
    model = get_peft_model(
        base, LoraConfig(**LORA, lora_dropout=0.0, target_modules="all-linear", task_type="CAUSAL_LM")
    )
    trainable = {name: p for name, p in model.named_parameters() if p.requires_grad}
    assert trainable.keys() == lora.keys()
    with torch.no_grad():
        for name, p in trainable.items():
            p.copy_(lora[name])
    return model.train()


def token_weighted_loss(model, rows) -> torch.Tensor:
    """Summed next-token loss over every supervised token / their count, each example run alone."""
    counts = [int((labels[1:] != IGNORE).sum()) for _, labels in rows]
    total = sum(counts)
    return sum(
        model(input_ids=ids[None], labels=labels[None]).loss * count / total
        for (ids, labels), count in zip(rows, counts, strict=True)
    )


def flat(gradients: dict[str, torch.Tensor]) -> torch.Tensor:
    return torch.cat([gradients[name].flatten().double() for name in sorted(gradients)])


def relative(actual: torch.Tensor, expected: torch.Tensor) -> float:
    return float((actual - expected).norm() / expected.norm())


@pytest.fixture(scope="module", params=["qlora", "lora"])
def evaluated_every_step(request, tiny_chat_llama, tmp_path_factory):
    """Two steps at learning rate 0, an evaluation after each, the run's final evaluation, and the reference."""
    method = request.param
    out = tmp_path_factory.mktemp(f"eval_every_step_{method}")
    data = write_jsonl(out / "train.jsonl", instruction_rows(ROWS, seed=7))
    argv = tiny_run_args(tiny_chat_llama, data, out / "out", "--method", method, "--max_steps", "2")
    argv += ["--eval_steps", "1", "--learning_rate", "0", "--max_grad_norm", "0", "--lora_dropout", "0"]
    argv += ["--per_device_batch_size", str(ROWS), "--no-packing", "--no-merge", "--eval_generations", "0"]
    recorder = Recorder()
    with contextlib.redirect_stdout(io.StringIO()):
        report = load_train_entry().main(argv, extra_callbacks=[recorder])
    fed = recorder.fed
    reference = plain_model(tiny_chat_llama, method, fed.lora)
    token_weighted_loss(reference, examples(fed.train_batches[:1])).backward()
    expected = {name: p.grad for name, p in reference.named_parameters() if p.requires_grad}
    with torch.no_grad():
        eval_loss = float(token_weighted_loss(reference, held_out_examples(argv, fed.eval_batches[-1])))
    return method, report, fed, flat(expected), eval_loss


def test_lora_gradients_after_an_evaluation_equal_those_before_it_and_the_plain_reference(evaluated_every_step):
    method, report, fed, expected, _ = evaluated_every_step
    assert len(fed.train_batches) == len(fed.gradients) == 2  # one batch per step
    assert len(examples(fed.train_batches[:1])) == report["data"]["train"]["examples"]
    assert [point["step"] for point in report["loss_curve"]["eval"]] == [1, 2, 2]  # the last: the run's own
    before, after = (flat(gradients) for gradients in fed.gradients)
    figures = {
        "step 1 vs plain": relative(before, expected),
        "step 2 (after an evaluation) vs plain": relative(after, expected),
        "step 2 vs step 1": relative(after, before),
    }
    print(f"{method}: " + ", ".join(f"{name} {value:.2e}" for name, value in figures.items()))
    assert all(value < 1e-5 for value in figures.values()), figures


def test_the_final_eval_loss_is_each_example_run_alone_in_the_compute_dtype(evaluated_every_step):
    method, report, fed, _, expected = evaluated_every_step
    assert len(fed.eval_batches) == 3 and len(examples(fed.eval_batches[-1])) == report["data"]["eval"]["examples"] == 8
    actual = report["eval_metrics"]["eval_loss"]
    print(f"{method}: final eval_loss {actual:.7f}, plain float32 reference {expected:.7f}")
    # float32 batched vs alone differs by ~1e-7; bitsandbytes' bf16 inference path is off by ~1e-5 here
    assert actual == pytest.approx(expected, rel=1e-6)


class ConversionLeftOn(TrainerCallback):
    """Gives the 4-bit layers back bitsandbytes' own setting, under which an evaluation converts them."""

    def on_train_begin(self, args, state, control, model=None, **kwargs):
        from bitsandbytes.functional import has_avx512bf16
        from finetune.cpu_4bit import CPU_INFERENCE_SWITCH, four_bit_layers

        for layer in four_bit_layers(model):
            setattr(layer, CPU_INFERENCE_SWITCH, has_avx512bf16())


def test_a_step_after_an_evaluation_converted_the_layers_stops_the_run_in_one_line(tiny_chat_llama, tmp_path, capsys):
    from bitsandbytes.functional import has_avx512bf16

    if not has_avx512bf16():
        pytest.skip("bitsandbytes converts 4-bit layers for inference only on CPUs with AVX512-BF16")
    data = write_jsonl(tmp_path / "train.jsonl", instruction_rows(ROWS, seed=7))
    argv = tiny_run_args(tiny_chat_llama, data, tmp_path / "out", "--max_steps", "2", "--eval_steps", "1")
    with pytest.raises(SystemExit) as stopped:
        load_train_entry().main([*argv, "--eval_generations", "0"], extra_callbacks=[ConversionLeftOn()])
    message = str(stopped.value.code)
    print(message)
    assert message.startswith("train.py: error: --eval_steps with --method qlora on CPU: bitsandbytes ")
    assert "converted 14 4-bit layers" in message and message.endswith("or --method lora, or train on a GPU")
    assert "\n" not in message and "step=2 " not in capsys.readouterr().out  # stopped before step 2
