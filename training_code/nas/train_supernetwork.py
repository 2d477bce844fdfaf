"""Fine-tunes a pre-trained encoder as a super-network for sentence-pair classification.

Runs locally or as a SageMaker training job (hyperparameters are these flags; defaults follow SM_*).
Each epoch logs ``epoch=...; train_loss=...; num_parameters=...; validation_error=...`` (see
``pruning.metrics.METRIC_DEFINITIONS``) and checkpoints to --checkpoint-dir, from which a restarted job resumes.
The result in --output-dir is a ``save_pretrained`` folder plus ``nas_supernet.json``.

    python train_supernetwork.py --model-name-or-path PATH --data-dir sample_data --output-dir out/supernet
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import asdict
from pathlib import Path

from pruning.cli import (
    CHECKPOINT_DIR,
    SUPERNET_METADATA,
    add_data_arguments,
    add_runtime_arguments,
    apply_runtime,
    load_classifier,
    load_data,
    read_json,
    sagemaker_checkpoint_dir,
    sm_default,
    write_json,
)
from pruning.metrics import format_metrics
from pruning.search_space import SPACES
from pruning.training import STRATEGIES, TrainSettings, train_supernetwork, training_phases

TRAINER_STATE = "trainer_state.pt"


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--model-name-or-path",
        default="bert-base-cased",
        help="pre-trained encoder: a hub id (cloud) or a local folder",
    )
    parser.add_argument("--output-dir", default=sm_default("SM_MODEL_DIR", "out/supernet"))
    parser.add_argument(
        "--checkpoint-dir",
        default=sagemaker_checkpoint_dir(),
        help=f"per-epoch checkpoints, resumed from (default in a SageMaker job: {CHECKPOINT_DIR}, the folder "
        "beside $SM_MODEL_DIR, if present; none outside a job)",
    )
    parser.add_argument("--strategy", choices=STRATEGIES, default="kd")
    parser.add_argument("--search-space", choices=SPACES, default="uniform")
    parser.add_argument("--num-random-subnets", type=int, default=2, help="random sub-networks per step")
    parser.add_argument(
        "--min-subnet-layers",
        type=int,
        default=1,
        help="fewest layers of a sub-network trained per step (0: the space's 0-layer smallest network, "
        "whose [CLS] vector ignores the input)",
    )
    parser.add_argument(
        "--classifier-pooling",
        choices=("cls", "mean"),
        default="cls",
        help="what the fresh classifier head reads: [CLS] through the pooler (BERT) or the mean of the token "
        "vectors (models trained with mean pooling, such as MiniLM-L6 sentence-transformers)",
    )
    parser.add_argument("--temperature", type=float, default=1.0, help="distillation temperature (kd)")
    parser.add_argument("--epochs", type=int, default=5, help="all epochs, the teacher epochs included")
    parser.add_argument(
        "--teacher-epochs",
        type=int,
        default=1,
        help="sandwich/kd: the first N epochs fine-tune the full network alone (the teacher)",
    )
    parser.add_argument(
        "--rewire",
        type=str.lower,  # SageMaker's toolkit JSON-decodes "true" and passes it on as "True"
        choices=("true", "false"),
        default="true",
        help="after the teacher epochs, order each layer's heads and FFN units by importance, so the "
        "prefixes sub-networks keep are the important ones",
    )
    parser.add_argument(
        "--importance-rows",
        type=int,
        default=None,
        help="rewiring scores heads/units on the first N training rows (default: all of them)",
    )
    parser.add_argument("--learning-rate", type=float, default=2e-5)
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--max-length", type=int, default=128)
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--max-steps", type=int, default=None, help="cap on optimizer steps per epoch")
    add_data_arguments(parser)
    add_runtime_arguments(parser)
    return parser.parse_args(argv)


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
    dims = model_dims(model.config)
    metadata = {
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
