"""The settings of each NAS script, each declared once: its type, default and help text live on its field here, the
script's parser is built from its dataclass (pruning.cli.settings_parser, transformers' HfArgumentParser) and the
stacks read the same fields to check the hyperparameters they pass (stacks/code_contract/nas.py loads this file
alone: standard library only).

A field's flag is its name with dashes (`--model-name-or-path`); `environment` in its metadata names the SM_*
variable that gives its default in a SageMaker job, and `one_of` a required choice of exactly one of several fields.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal, get_args

Strategy = Literal["standard", "sandwich", "kd"]
SearchSpace = Literal["uniform", "per_layer"]  # pruning.search_space.SPACES (a test holds them equal)
Searcher = Literal["random", "morea"]
Objective = Literal["validation_error", "num_parameters", "latency_ms", "macs"]
STRATEGIES: tuple[str, ...] = get_args(Strategy)
SEARCHERS: tuple[str, ...] = get_args(Searcher)
OBJECTIVES: tuple[str, ...] = get_args(Objective)
DEFAULT_OBJECTIVES = "validation_error,num_parameters"
CHECKPOINT_DIR = "/opt/ml/checkpoints"  # CheckpointConfig.LocalPath in a SageMaker job (its default)
PICK = "the sub-network to export"  # export_subnetwork.py: a required choice of one of its fields
RECORDED = " (trials and the search default to the value in nas_supernet.json)"


def _meta(help_text: str | None = None, **extra: Any) -> dict[str, Any]:
    return {**({"help": help_text} if help_text else {}), **extra}


@dataclass(kw_only=True)
class SplitSettings:
    """The data and its train/validation cut: chosen when the super-network is trained and recorded in
    nas_supernet.json; every later job reuses it (pruning.cli.resolve_split) or its validation rows overlap
    training rows."""

    dataset: Literal["jsonl", "glue_rte"] = field(
        default="jsonl",
        metadata=_meta("jsonl: train.jsonl/test.jsonl in --data-dir; glue_rte: GLUE RTE (HF hub)" + RECORDED),
    )
    data_dir: str | None = field(
        default=None,
        metadata=_meta(
            "folder with train.jsonl and test.jsonl (default: $SM_CHANNEL_TRAINING)", environment="SM_CHANNEL_TRAINING"
        ),
    )
    validation_fraction: float = field(
        default=0.3, metadata=_meta("share of the train split held out for validation" + RECORDED)
    )
    split_seed: int = field(default=42, metadata=_meta("seed of the train/validation cut" + RECORDED))
    max_rows: int | None = field(
        default=None, metadata=_meta("use only the first N rows of each split (quick local runs and tests)")
    )
    num_threads: int | None = field(default=None, metadata=_meta("torch CPU threads (default: torch's)"))


@dataclass(kw_only=True)
class _SupernetOwn:
    model_name_or_path: str = field(
        default="bert-base-cased", metadata=_meta("pre-trained encoder: a hub id (cloud) or a local folder")
    )
    output_dir: str = field(default="out/supernet", metadata=_meta(environment="SM_MODEL_DIR"))
    checkpoint_dir: str | None = field(
        default=None,
        metadata=_meta(
            f"per-epoch checkpoints, resumed from (default in a SageMaker job: {CHECKPOINT_DIR}, the folder "
            "beside $SM_MODEL_DIR, if present; none outside a job)"
        ),
    )
    strategy: Strategy = "kd"
    search_space: SearchSpace = "uniform"
    num_random_subnets: int = field(default=2, metadata=_meta("random sub-networks per step"))
    min_subnet_layers: int = field(
        default=1,
        metadata=_meta(
            "fewest layers of a sub-network trained per step (0: the space's 0-layer smallest network, "
            "whose [CLS] vector ignores the input)"
        ),
    )
    classifier_pooling: Literal["cls", "mean"] = field(
        default="cls",
        metadata=_meta(
            "what the fresh classifier head reads: [CLS] through the pooler (BERT) or the mean of the token "
            "vectors (models trained with mean pooling, such as MiniLM-L6 sentence-transformers)"
        ),
    )
    temperature: float = field(default=1.0, metadata=_meta("distillation temperature (kd)"))
    epochs: int = field(default=5, metadata=_meta("all epochs, the teacher epochs included"))
    teacher_epochs: int = field(
        default=1, metadata=_meta("sandwich/kd: the first N epochs fine-tune the full network alone (the teacher)")
    )
    rewire: Literal["true", "false"] = field(
        default="true",
        metadata=_meta(
            "after the teacher epochs, order each layer's heads and FFN units by importance, so the "
            "prefixes sub-networks keep are the important ones",
            type=str.lower,  # SageMaker's toolkit JSON-decodes "true" and passes it on as "True"
        ),
    )
    importance_rows: int | None = field(
        default=None, metadata=_meta("rewiring scores heads/units on the first N training rows (default: all of them)")
    )
    learning_rate: float = 2e-5
    batch_size: int = 8
    max_length: int = 128
    seed: int = 42
    max_steps: int | None = field(default=None, metadata=_meta("cap on optimizer steps per epoch"))


@dataclass(kw_only=True)
class SupernetSettings(SplitSettings, _SupernetOwn):
    """train_supernetwork.py."""


@dataclass(kw_only=True)
class _TrialOwn:
    model_dir: str | None = field(
        default=None,
        metadata=_meta(
            "trained super-network folder, or one holding model.tar.gz ($SM_CHANNEL_MODEL)",
            environment="SM_CHANNEL_MODEL",
        ),
    )
    output_data_dir: str | None = field(default=None, metadata=_meta(environment="SM_OUTPUT_DATA_DIR"))
    search_space: SearchSpace | None = field(
        default=None, metadata=_meta("default: the space the super-network was trained for")
    )
    max_length: int | None = field(default=None, metadata=_meta("default: the training max length"))
    split: Literal["validation", "test"] = "validation"
    latency_batch_size: int = 8
    latency_repeats: int = 20


@dataclass(kw_only=True)
class TrialSettings(SplitSettings, _TrialOwn):
    """evaluate_subnetwork.py. The sub-network's own flags depend on the space and the model's dimensions
    (pruning.search_space.parameter_specs): the script adds them and records their values in `subnetwork`."""

    subnetwork: dict[str, int] = field(init=False, default_factory=dict)


@dataclass(kw_only=True)
class _SearchOwn:
    model_dir: str | None = field(default=None, metadata=_meta("super-network folder", environment="SM_CHANNEL_MODEL"))
    output_dir: str = field(default="out/search", metadata=_meta(environment="SM_OUTPUT_DATA_DIR"))
    search_space: SearchSpace | None = field(default=None, metadata=_meta("default: the training space"))
    searcher: Searcher = "morea"
    num_samples: int = 100
    objectives: str = field(default=DEFAULT_OBJECTIVES, metadata=_meta(f"comma-separated, from {OBJECTIVES}"))
    seed: int = 0
    max_length: int | None = field(default=None, metadata=_meta("default: the training max length"))
    latency_batch_size: int = 8
    latency_repeats: int = field(
        default=10, metadata=_meta("per trial; 0: no latency_ms (e.g. with the macs objective)")
    )
    final_latency_repeats: int = field(
        default=30,
        metadata=_meta("re-times the front and the unpruned network, interleaved, as latency_ms_final (0: skip)"),
    )
    no_test_rescore: bool = field(default=False, metadata=_meta("skip re-scoring the front on test"))


@dataclass(kw_only=True)
class SearchSettings(SplitSettings, _SearchOwn):
    """search_subnetworks.py."""


@dataclass(kw_only=True)
class ParetoSettings:
    """select_pareto.py."""

    trials: str | None = field(
        default=None,
        metadata=_meta("results file or folder ($SM_CHANNEL_TRIALS)", environment="SM_CHANNEL_TRIALS"),
    )
    output_dir: str = field(default="out/pareto", metadata=_meta(environment="SM_OUTPUT_DATA_DIR"))
    model_dir: str | None = field(
        default=None,
        metadata=_meta("super-network folder (config.json, nas_supernet.json)", environment="SM_CHANNEL_MODEL"),
    )
    unpruned_json: str | None = field(default=None, metadata=_meta("metrics of the unpruned model"))
    search_space: SearchSpace | None = None
    objectives: str = DEFAULT_OBJECTIVES


@dataclass(kw_only=True)
class TuningJobSettings:
    """select_tuning_job.py."""

    tuning_job_name: str
    model_dir: str | None = field(default=None, metadata=_meta("super-network folder", environment="SM_CHANNEL_MODEL"))
    output_dir: str = field(default="out/pareto", metadata=_meta(environment="SM_MODEL_DIR"))
    output_s3_uri: str | None = field(default=None, metadata=_meta("s3://bucket/prefix/ to copy the results to"))
    search_space: str | None = None
    objectives: str = DEFAULT_OBJECTIVES
    region: str | None = field(default=None, metadata=_meta("default: AWS_REGION or the job's sagemaker_region"))


@dataclass(kw_only=True)
class ExportSettings:
    """export_subnetwork.py; exactly one of the `one_of` fields picks the sub-network."""

    model_dir: str | None = field(default=None, metadata=_meta("super-network folder", environment="SM_CHANNEL_MODEL"))
    pareto_file: str | None = field(
        default=None,
        metadata=_meta(
            "pareto.json of search_subnetworks.py or select_pareto.py (default: $SM_CHANNEL_PARETO/pareto.json)"
        ),
    )
    output_dir: str = field(default="out/export", metadata=_meta(environment="SM_MODEL_DIR"))
    index: int | None = field(default=None, metadata=_meta("position in the front sorted by parameters", one_of=PICK))
    max_error: float | None = field(
        default=None, metadata=_meta("smallest sub-network with at most this error", one_of=PICK)
    )
    max_error_increase: float | None = field(
        default=None, metadata=_meta("smallest sub-network with at most the unpruned error plus this", one_of=PICK)
    )
    minimise: Literal["num_parameters", "latency_ms", "macs", "latency_ms_final"] = field(
        default="num_parameters",
        metadata=_meta(
            "what the error-budget pick minimises (latency_ms / macs: search with it as an objective; "
            "latency_ms_final: the front re-timed by search_subnetworks.py)"
        ),
    )
    quantize: Literal["none", "dynamic_int8"] = field(
        default="none",
        metadata=_meta(
            "dynamic_int8: the handler serves the Linear layers in int8 (accuracy re-measured with --data-dir)"
        ),
    )
    data_dir: str | None = field(
        default=None,
        metadata=_meta(
            "the super-network's data: re-measures the validation error after compression",
            environment="SM_CHANNEL_TRAINING",
        ),
    )
    inference_code_dir: str | None = field(
        default=None, metadata=_meta("copied to <output-dir>/code (serving_artifacts/encoder_classifier/code)")
    )


@dataclass(kw_only=True)
class ExportModelsSettings:
    """export_models.py's own flags; the rest of its command line goes to export_subnetwork.py."""

    base_output_dir: str | None = field(default=None, metadata=_meta("default: a temporary folder"))
    base_output_s3_uri: str | None = field(default=None, metadata=_meta("s3://bucket/key/model.tar.gz"))
    model_dir: str | None = field(default=None, metadata=_meta(environment="SM_CHANNEL_MODEL"))
    inference_code_dir: str | None = None


# The settings of the scripts a job runs with hyperparameters from the stacks' config.
SCRIPT_SETTINGS = {
    "train_supernetwork.py": SupernetSettings,
    "evaluate_subnetwork.py": TrialSettings,
    "search_subnetworks.py": SearchSettings,
    "select_pareto.py": ParetoSettings,
    "select_tuning_job.py": TuningJobSettings,
    "export_subnetwork.py": ExportSettings,
    "export_models.py": ExportModelsSettings,
}
