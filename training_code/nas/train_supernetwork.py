"""Fine-tunes a pre-trained encoder as a super-network for sentence-pair classification.

Runs locally or as a SageMaker training job (hyperparameters are these flags; defaults follow SM_*).
Each epoch logs ``epoch=...; train_loss=...; num_parameters=...; validation_error=...`` (see
``pruning.metrics.METRIC_DEFINITIONS``) and checkpoints to --checkpoint-dir, from which a restarted job resumes.
The result in --output-dir is a ``save_pretrained`` folder plus ``nas_supernet.json``.

    python train_supernetwork.py --model-name-or-path PATH --data-dir sample_data --output-dir out/supernet
"""

from __future__ import annotations

import sys
from dataclasses import asdict
from pathlib import Path

from pruning.cli import (
    SUPERNET_METADATA,
    apply_runtime,
    load_classifier,
    load_data,
    parse_settings,
    read_json,
    sagemaker_checkpoint_dir,
    settings_parser,
    write_json,
)
from pruning.metrics import format_metrics
from pruning.settings import SupernetSettings
from pruning.training import TrainSettings, train_supernetwork, training_phases

TRAINER_STATE = "trainer_state.pt"


def parse_args(argv=None) -> SupernetSettings:
    parser = settings_parser(SupernetSettings, __doc__)
    parser.set_defaults(checkpoint_dir=sagemaker_checkpoint_dir())
    return parse_settings(parser, SupernetSettings, argv)


def settings_from_args(args) -> TrainSettings:
    return TrainSettings(
        strategy=args.strategy,
        search_space=args.search_space,
        num_random_subnets=args.num_random_subnets,
        min_subnet_layers=args.min_subnet_layers,
        temperature=args.temperature,
        epochs=args.epochs,
        learning_rate=args.learning_rate,
        batch_size=args.batch_size,
        max_length=args.max_length,
        seed=args.seed,
        max_steps=args.max_steps,
        teacher_epochs=args.teacher_epochs,
        rewire=args.rewire == "true",
        importance_rows=args.importance_rows,
    )


def resume_point(checkpoint_dir: str | None):
    """(model folder, first epoch to run, optimizer state) of the last complete checkpoint, if any."""
    if not checkpoint_dir:
        return None, 1, None
    folder = Path(checkpoint_dir) / "supernet"
    state_file = folder / TRAINER_STATE
    if not state_file.exists():
        return None, 1, None
    import torch

    state = torch.load(state_file, weights_only=False)
    return folder, state["epoch"] + 1, state


def initial_model(path, seed: int, pooling: str | None = None):
    """The encoder with its fresh classifier head drawn from ``seed`` (the head is built while loading,
    so the seed must be set before it, not only before the first epoch)."""
    import torch

    torch.manual_seed(seed)
    return load_classifier(path, pooling)


def save_supernet(model, tokenizer, folder: Path, metadata: dict) -> None:
    """Our model class (mean pooling) is saved with its code (``auto_map``), as the exports are."""
    from pruning.pruned_bert import PrunedBertForSequenceClassification

    if isinstance(model, PrunedBertForSequenceClassification):
        type(model).register_for_auto_class("AutoModelForSequenceClassification")
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    write_json(folder / SUPERNET_METADATA, metadata)


def supernet_record(args: SupernetSettings, settings: TrainSettings, dims, num_parameters: int) -> dict:
    """nas_supernet.json: what later jobs reuse (space, max length, pooling, the train/validation cut)."""
    return {
        "base_model": args.model_name_or_path,
        "search_space": args.search_space,
        "strategy": args.strategy,
        "teacher_epochs": settings.teacher_epochs,
        "rewired": any(phase.rewire_after for phase in training_phases(settings)),
        "max_length": args.max_length,
        "classifier_pooling": args.classifier_pooling,
        "dims": asdict(dims),
        "num_parameters": num_parameters,
        "dataset": args.dataset,
        "split_seed": args.split_seed,
        "validation_fraction": args.validation_fraction,
    }


def main(argv=None) -> int:
    args = parse_args(argv)
    apply_runtime(args)
    import torch
    from pruning.export import count_model_parameters
    from pruning.masks import model_dims

    try:
        settings = settings_from_args(args)
    except ValueError as error:
        raise SystemExit(f"train_supernetwork.py: {error}") from None
    splits = load_data(args)
    resume_folder, start_epoch, optimizer_state = resume_point(args.checkpoint_dir)
    model, tokenizer = initial_model(
        resume_folder or args.model_name_or_path, args.seed, None if resume_folder else args.classifier_pooling
    )
    num_parameters = count_model_parameters(model)
    metadata = supernet_record(args, settings, model_dims(model.config), num_parameters)
    if resume_folder is not None:
        metadata.update(read_json(resume_folder / SUPERNET_METADATA))
        print(f"resuming from {resume_folder} at epoch {start_epoch}", flush=True)

    def on_epoch_end(epoch, loss, error, optimizer, scheduler):
        print(
            format_metrics(epoch=epoch, train_loss=loss, num_parameters=num_parameters, validation_error=error),
            flush=True,
        )
        metadata.update(epochs_done=epoch, validation_error=error)
        if args.checkpoint_dir:
            folder = Path(args.checkpoint_dir) / "supernet"
            save_supernet(model, tokenizer, folder, metadata)
            torch.save(
                {"epoch": epoch, "optimizer": optimizer.state_dict(), "scheduler": scheduler.state_dict()},
                folder / TRAINER_STATE,
            )

    train_supernetwork(
        model,
        tokenizer,
        splits["train"],
        splits["validation"],
        settings,
        on_epoch_end=on_epoch_end,
        start_epoch=start_epoch,
        optimizer_state=optimizer_state,
    )
    save_supernet(model, tokenizer, Path(args.output_dir), metadata)
    print(f"super-network saved to {args.output_dir}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
