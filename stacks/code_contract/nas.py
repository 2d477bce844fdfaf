"""What the pruning stack hands training_code/nas: entry points, the scripts' flags, the tuning job's ranges,
metric definitions."""

from __future__ import annotations

import dataclasses

from ..paths import NAS_CODE
from .loader import load_code_module

SUPERNET_PROGRAM = "train_supernetwork.py"
TRIAL_PROGRAM = "evaluate_subnetwork.py"
SELECT_PROGRAM = "select_tuning_job.py"
EXPORT_PROGRAM = "export_models.py"
OBJECTIVE_METRIC = "validation_error"


def script_flags(program: str) -> tuple[str, ...]:
    """The `--flag` names (without dashes in front) a script's parser accepts, read from the settings dataclass it
    is built from (training_code/nas/pruning/settings.py); evaluate_subnetwork.py's sub-network flags come from the
    search space instead (parameter_ranges)."""
    settings = load_code_module(NAS_CODE, "pruning/settings.py").SCRIPT_SETTINGS[program]
    return tuple(sorted(f.name.replace("_", "-") for f in dataclasses.fields(settings) if f.init))


def parameter_ranges(search_space: str, num_layers: int, num_heads: int, intermediate_size: int) -> dict:
    """The tuning job's ParameterRanges from the code's own search-space module (one definition)."""
    module = load_code_module(NAS_CODE, "pruning/search_space.py")
    return module.sagemaker_parameter_ranges(search_space, num_layers, num_heads, intermediate_size)


def metric_definitions() -> list[dict[str, str]]:
    """SageMaker MetricDefinitions (Name/Regex) the NAS jobs print."""
    return [dict(d) for d in load_code_module(NAS_CODE, "pruning/metrics.py").METRIC_DEFINITIONS]


def model_dims_problem(num_layers: int, num_heads: int, intermediate_size: int, model_config: dict) -> str | None:
    """Why the typed dimensions do not match the model's config.json (the code's own check), or None."""
    module = load_code_module(NAS_CODE, "pruning/search_space.py")
    try:
        module.check_model_dims(module.ModelDims(num_layers, num_heads, intermediate_size), model_config)
    except ValueError as err:
        return str(err)
    return None
