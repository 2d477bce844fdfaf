"""Super-network fine-tuning: ``standard``, ``sandwich`` and ``kd`` strategies over masked sub-networks.

- ``standard``: the full network with cross-entropy only (a plain fine-tune; the baseline).
- ``sandwich``: per step the largest, the smallest and ``num_random`` random sub-networks, all with
  cross-entropy on the labels (gradients accumulated, one optimizer step).
- ``kd``: as ``sandwich``, but the sub-networks learn from the full network's logits of the same step
  (detached) with a temperature-scaled KL divergence; the full network keeps its cross-entropy.

With ``sandwich`` and ``kd`` the first ``teacher_epochs`` train the full network alone; then (``rewire``)
every layer's heads and FFN units are reordered by importance (``pruning.importance``), so that the prefixes
sub-networks keep are the heads and units that matter, and the remaining epochs train the sub-networks
(each phase with its own optimizer and warm-up/decay schedule).
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, replace

import torch
import torch.nn.functional as F

from .data import Pair, batches
from .importance import importance_scores, rewire
from .masks import SubnetworkMasks
from .search_space import (
    ModelDims,
    SubnetConfig,
    config_from_hyperparameters,
    parameter_specs,
    sample_hyperparameters,
    smallest_config,
)
from .settings import STRATEGIES


@dataclass
class TrainSettings:
    strategy: str = "kd"
    search_space: str = "uniform"
    num_random_subnets: int = 2
    temperature: float = 1.0
    epochs: int = 5
    learning_rate: float = 2e-5
    batch_size: int = 8
    max_length: int = 128
    seed: int = 42
    max_steps: int | None = None
    warmup_fraction: float = 0.1
    min_subnet_layers: int = 1
    teacher_epochs: int = 1
    rewire: bool = True
    importance_rows: int | None = None

    def __post_init__(self) -> None:
        if self.strategy not in STRATEGIES:
            raise ValueError(f"unknown strategy {self.strategy!r}; expected one of {STRATEGIES}")
        if self.strategy != "standard" and not 0 <= self.teacher_epochs < self.epochs:
            raise ValueError(
                f"teacher_epochs {self.teacher_epochs} must be in 0..epochs-1 ({self.epochs - 1}): "
                "the last epochs train the sub-networks"
            )


@dataclass(frozen=True)
class Phase:
    """Epochs ``first``..``last`` (1-based, inclusive) trained with ``settings``; rewire after the last?"""

    first: int
    last: int
    settings: TrainSettings
    rewire_after: bool = False

    @property
    def num_epochs(self) -> int:
        return self.last - self.first + 1


def training_phases(settings: TrainSettings) -> list[Phase]:
    """The teacher phase (full network alone, if any) and the super-network phase."""
    if settings.strategy == "standard" or settings.teacher_epochs == 0:
        return [Phase(1, settings.epochs, settings)]
    teacher = replace(settings, strategy="standard")
    return [
        Phase(1, settings.teacher_epochs, teacher, rewire_after=settings.rewire),
        Phase(settings.teacher_epochs + 1, settings.epochs, settings),
    ]


def distillation_loss(student_logits: torch.Tensor, teacher_logits: torch.Tensor, temperature: float):
    """KL(teacher || student) on temperature-softened distributions, scaled by T^2 (Hinton et al.)."""
    student = F.log_softmax(student_logits / temperature, dim=-1)
    teacher = F.softmax(teacher_logits / temperature, dim=-1)
    return F.kl_div(student, teacher, reduction="batchmean") * temperature**2


def training_smallest(space: str, dims: ModelDims, min_layers: int) -> SubnetConfig:
    """The sandwich's lower bound: ``min_layers`` layers of the space's minimum, with at least one head.

    The space's own smallest network (0 layers, or layers without heads) never mixes tokens, so its [CLS]
    vector is the same for every input and it can only learn a constant: a wasted pass per step.
    """
    if min_layers == 0:
        return smallest_config(space, dims)
    values = {spec.name: spec.minimum() for spec in parameter_specs(space, dims)}
    values["num_layers"] = min_layers
    for name in values:
        if name.startswith("num_heads"):
            values[name] = max(1, values[name])
    return config_from_hyperparameters(space, values, dims)


def subnetworks_for_step(settings: TrainSettings, masks: SubnetworkMasks, rng: random.Random) -> list:
    if settings.strategy == "standard":
        return []
    subnets = [training_smallest(settings.search_space, masks.dims, settings.min_subnet_layers)]
    for _ in range(settings.num_random_subnets):
        values = sample_hyperparameters(settings.search_space, masks.dims, rng)
        values["num_layers"] = max(values["num_layers"], settings.min_subnet_layers)
        subnets.append(config_from_hyperparameters(settings.search_space, values, masks.dims))
    return subnets


def training_step(model, masks: SubnetworkMasks, batch: dict, settings: TrainSettings, rng: random.Random) -> float:
    """Accumulates the gradients of one step; returns the full network's cross-entropy."""
    labels = batch["labels"]
    inputs = {k: v for k, v in batch.items() if k != "labels"}
    full_logits = model(**inputs).logits
    full_loss = F.cross_entropy(full_logits, labels)
    full_loss.backward()
    teacher = full_logits.detach()
    for subnet in subnetworks_for_step(settings, masks, rng):
        with masks.use(subnet):
            logits = model(**inputs).logits
        if settings.strategy == "kd":
            loss = distillation_loss(logits, teacher, settings.temperature)
        else:
            loss = F.cross_entropy(logits, labels)
        loss.backward()
    return full_loss.item()


@torch.no_grad()
def error_rate(
    model,
    tokenizer,
    pairs: list[Pair],
    max_length: int,
    batch_size: int = 32,
    masks: SubnetworkMasks | None = None,
    subnet: SubnetConfig | None = None,
) -> float:
    """Share of misclassified pairs, for the full model or a masked sub-network of it."""
    was_training = model.training
    model.eval()
    wrong = 0
    for batch in batches(pairs, tokenizer, batch_size, max_length):
        labels = batch.pop("labels")
        if masks is not None:
            with masks.use(subnet):
                logits = model(**batch).logits
        else:
            logits = model(**batch).logits
        wrong += int((logits.argmax(-1) != labels).sum())
    model.train(was_training)
    return wrong / len(pairs)


def make_optimizer(model, settings: TrainSettings, total_steps: int):
    optimizer = torch.optim.AdamW(model.parameters(), lr=settings.learning_rate, weight_decay=0.01)
    warmup = max(1, int(total_steps * settings.warmup_fraction))

    def schedule(step: int) -> float:
        if step < warmup:
            return (step + 1) / warmup
        return max(0.0, (total_steps - step) / max(1, total_steps - warmup))

    return optimizer, torch.optim.lr_scheduler.LambdaLR(optimizer, schedule)


def steps_per_epoch(num_rows: int, settings: TrainSettings) -> int:
    steps = -(-num_rows // settings.batch_size)
    return min(steps, settings.max_steps) if settings.max_steps else steps


def train_epoch(
    model,
    masks,
    tokenizer,
    train: list[Pair],
    settings: TrainSettings,
    optimizer,
    scheduler,
    epoch: int,
) -> float:
    """One pass over ``train``. Sub-network draws and dropout are seeded per epoch, so a job resumed from
    the checkpoint of epoch N-1 trains epoch N exactly as an uninterrupted one would."""
    torch.manual_seed(settings.seed * 1_000 + epoch)
    rng = random.Random(settings.seed * 1_000 + epoch)
    model.train()
    losses = []
    limit = steps_per_epoch(len(train), settings)
    for step, batch in enumerate(
        batches(train, tokenizer, settings.batch_size, settings.max_length, shuffle_seed=settings.seed + epoch)
    ):
        if step >= limit:
            break
        optimizer.zero_grad()
        losses.append(training_step(model, masks, batch, settings, rng))
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        scheduler.step()
    return sum(losses) / len(losses)


def rewire_by_importance(masks: SubnetworkMasks, tokenizer, train: list[Pair], settings: TrainSettings) -> None:
    """Reorders heads and units by their importance for the loss on the training split (its first
    ``importance_rows`` rows if set: the order converges long before a full pass on a CPU)."""
    rows = train[: settings.importance_rows] if settings.importance_rows else train
    scores = importance_scores(masks, batches(rows, tokenizer, settings.batch_size, settings.max_length))
    rewire(masks.model, *scores)


def train_supernetwork(
    model,
    tokenizer,
    train: list[Pair],
    validation: list[Pair],
    settings: TrainSettings,
    on_epoch_end: Callable[[int, float, float, object, object], None] | None = None,
    start_epoch: int = 1,
    optimizer_state: dict | None = None,
) -> dict:
    """Fine-tunes ``model`` in place; calls ``on_epoch_end(epoch, loss, error, optimizer, scheduler)``.

    ``optimizer_state`` (saved at ``start_epoch - 1``) is restored only when that epoch belongs to the same
    phase; a checkpoint taken after the teacher phase already holds the rewired weights.
    """
    masks = SubnetworkMasks(model)
    history = []
    try:
        for phase in training_phases(settings):
            if start_epoch > phase.last:
                continue
            total_steps = steps_per_epoch(len(train), phase.settings) * phase.num_epochs
            optimizer, scheduler = make_optimizer(model, phase.settings, total_steps)
            if optimizer_state is not None and start_epoch > phase.first:
                optimizer.load_state_dict(optimizer_state["optimizer"])
                scheduler.load_state_dict(optimizer_state["scheduler"])
            for epoch in range(max(start_epoch, phase.first), phase.last + 1):
                loss = train_epoch(model, masks, tokenizer, train, phase.settings, optimizer, scheduler, epoch)
                if epoch == phase.last and phase.rewire_after:
                    rewire_by_importance(masks, tokenizer, train, settings)
                error = error_rate(model, tokenizer, validation, settings.max_length)
                history.append({"epoch": epoch, "train_loss": loss, "validation_error": error})
                if on_epoch_end is not None:
                    on_epoch_end(epoch, loss, error, optimizer, scheduler)
    finally:
        masks.remove()
    model.eval()
    return {"history": history}
