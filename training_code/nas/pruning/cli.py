"""Shared command-line plumbing: parsers built from pruning.settings (SageMaker defaults from SM_* variables),
model loading, metadata files."""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
from pathlib import Path

from .settings import SplitSettings

SUPERNET_METADATA = "nas_supernet.json"


def sm_default(variable: str, fallback: str | None) -> str | None:
    return os.environ.get(variable, fallback)


def sagemaker_checkpoint_dir() -> str | None:
    """The job's checkpoint folder: ``checkpoints`` beside SM_MODEL_DIR (pruning.settings.CHECKPOINT_DIR on
    SageMaker, the emulated job's folder under local/emulator, as training_code/qlora derives it), when it exists
    (SageMaker creates it for a job with a CheckpointConfig). None outside a job (SM_MODEL_DIR unset), so a
    run on a dev box never resumes from what another run left in /opt/ml/checkpoints."""
    model_dir = os.environ.get("SM_MODEL_DIR")
    if not model_dir:
        return None
    folder = os.path.join(os.path.dirname(model_dir.rstrip("/")), "checkpoints")
    return folder if os.path.isdir(folder) else None


# The train/validation cut's defaults, for a super-network whose nas_supernet.json does not record it.
SPLIT_DEFAULTS = {name: getattr(SplitSettings, name) for name in ("dataset", "validation_fraction", "split_seed")}


def settings_parser(settings: type, description: str | None, **kwargs) -> argparse.ArgumentParser:
    """The parser of one script's settings dataclass (pruning.settings), its module docstring as the description
    (transformers is imported here, so select_pareto.py and the modules it uses import without it)."""
    from .arguments import SageMakerArgumentParser

    return SageMakerArgumentParser(
        settings, description=description, formatter_class=argparse.RawDescriptionHelpFormatter, **kwargs
    )


def parse_settings(parser: argparse.ArgumentParser, settings: type, argv=None):
    """The script's settings from argv (an argparse error exits 2 with the usage, as SageMaker's job log shows)."""
    return settings_from(parser.parse_args(argv), settings)


def settings_from(namespace: argparse.Namespace, settings: type):
    """The `settings` dataclass of a parsed command line (its flags' fields; the parser may hold more)."""
    return settings(**{f.name: getattr(namespace, f.name) for f in dataclasses.fields(settings) if f.init})


def defer_split_to_metadata(parser: argparse.ArgumentParser) -> None:
    """Split flags default to None: ``resolve_split`` fills them from the super-network's metadata (a differing
    value is an error, not an override)."""
    parser.set_defaults(**dict.fromkeys(SPLIT_DEFAULTS))


def resolve_split(args, metadata: dict) -> None:
    """Fills the split flags left at None from the super-network's metadata; fails on a contradiction."""
    for name, fallback in SPLIT_DEFAULTS.items():
        given, recorded = getattr(args, name), metadata.get(name)
        if given is not None and recorded is not None and given != recorded:
            flag = "--" + name.replace("_", "-")
            raise SystemExit(
                f"{flag} {given} differs from the super-network's {recorded} (nas_supernet.json): trials must "
                f"validate on the rows the super-network held out; drop {flag}"
            )
        setattr(args, name, given if given is not None else recorded if recorded is not None else fallback)


def apply_runtime(args) -> None:
    import torch

    if args.num_threads:
        torch.set_num_threads(args.num_threads)


def load_data(args) -> dict:
    from .data import load_splits

    if args.dataset == "jsonl" and not args.data_dir:
        raise SystemExit("--data-dir (or SM_CHANNEL_TRAINING) is required for --dataset jsonl")
    splits = load_splits(args.dataset, args.data_dir, args.validation_fraction, args.split_seed)
    if args.max_rows:
        splits = {name: rows[: args.max_rows] for name, rows in splits.items()}
    return splits


def load_classifier(path: str | Path, pooling: str | None = None):
    """A BERT sequence classifier and its tokenizer from a local folder (never the hub for local paths).

    ``pooling`` ("cls" or "mean") is the head's pooling for a fresh head; None keeps the folder's own
    (``classifier_pooling`` in its config.json, [CLS] if absent). Mean pooling needs our model class."""
    from transformers import AutoConfig, AutoModelForSequenceClassification, AutoTokenizer

    from .data import LABELS

    labels = {
        "num_labels": len(LABELS),
        "id2label": dict(enumerate(LABELS)),
        "label2id": {label: i for i, label in enumerate(LABELS)},
    }
    config = AutoConfig.from_pretrained(path, **labels)
    if (pooling or getattr(config, "classifier_pooling", "cls")) == "mean":
        from .pruned_bert import PrunedBertForSequenceClassification

        config.classifier_pooling = "mean"
        model = PrunedBertForSequenceClassification.from_pretrained(path, config=config)
    else:
        model = AutoModelForSequenceClassification.from_pretrained(path, config=config)
    return model.eval(), AutoTokenizer.from_pretrained(path)


def read_json(path: str | Path) -> dict:
    return json.loads(Path(path).read_text())


def write_json(path: str | Path, data) -> None:
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    Path(path).write_text(json.dumps(data, indent=2))


def supernet_metadata(model_dir: str | Path) -> dict:
    path = Path(model_dir) / SUPERNET_METADATA
    return read_json(path) if path.exists() else {}
