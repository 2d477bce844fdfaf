"""Instance types checked against botocore's SageMaker model: the enum of the API shape that receives them.

A type SageMaker's API does not list (a typo, a family it does not offer for that API) fails the synth with
the closest valid names, instead of failing the job or endpoint creation after a deploy.
"""

from __future__ import annotations

import difflib
from functools import cache

from .aws_models import shapes
from .errors import ConfigError

TRAINING = "TrainingInstanceType"  # CreateTrainingJob / CreateHyperParameterTuningJob ResourceConfig
ENDPOINT = "ProductionVariantInstanceType"  # CreateEndpointConfig ProductionVariants
PROCESSING = "ProcessingInstanceType"  # CreateProcessingJob ClusterConfig


@cache
def valid_types(shape: str) -> tuple[str, ...]:
    """The enum of `shape` in botocore's SageMaker model."""
    return tuple(shapes("sagemaker")[shape]["enum"])


def check_instance_type(value: str, shape: str, source: str, field: str) -> None:
    """One ConfigError line naming `field` and the closest types of `shape` when `value` is not one of them."""
    known = valid_types(shape)
    if value in known:
        return
    close = difflib.get_close_matches(value, known, n=3, cutoff=0.6)
    fix = f"closest: {', '.join(close)}" if close else f"e.g. {', '.join(known[:3])}"
    raise ConfigError(source, field, f"got {value!r}; not a SageMaker {shape} (botocore's model): {fix}")
