"""A SageMaker hyperparameter tuning job run locally: Random strategy over the ParameterRanges, trials in turn.

Each trial is the TrainingJobDefinition as a training job named `<tuning job>-NNN-<8 hex>` (SageMaker's form)
with the StaticHyperParameters plus the sampled values (strings, as SageMaker passes them) and
`_tuning_objective_metric` (the objective's metric name, which AMT adds to every trial), run by the
LocalJobRunner. Its objective is the final value of the objective metric; a trial that fails or reports no
such metric is recorded (`ObjectiveStatus: Failed`) and the search goes on, as SageMaker's does. The job
completes when at least one trial has an objective and fails otherwise.

Local differences: MaxNumberOfTrainingJobs is capped by the runner's `max_trials`, trials run one at a time
(MaxParallelTrainingJobs is not used), and the sampler is seeded with the tuning job's name, so a rerun of the
same job name draws the same configurations.
"""

from __future__ import annotations

import hashlib
import math
import random
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any


@dataclass
class Trial:
    name: str
    tuned: dict[str, str]
    request: dict[str, Any]
    status: str = "InProgress"
    failure_reason: str | None = None
    objective: float | None = None
    outcome: Any = None


@dataclass
class TuningPlan:
    """The trials to run for one CreateHyperParameterTuningJob request."""

    name: str
    objective_metric: str
    objective_type: str
    trials: list[Trial] = field(default_factory=list)


def _sample_integer(rng: random.Random, spec: Mapping[str, str]) -> str:
    low, high = int(spec["MinValue"]), int(spec["MaxValue"])
    if spec.get("ScalingType") == "Logarithmic" and low > 0:
        return str(round(math.exp(rng.uniform(math.log(low), math.log(high)))))
    return str(rng.randint(low, high))


def _sample_continuous(rng: random.Random, spec: Mapping[str, str]) -> str:
    low, high = float(spec["MinValue"]), float(spec["MaxValue"])
    if spec.get("ScalingType") == "Logarithmic" and low > 0:
        return repr(math.exp(rng.uniform(math.log(low), math.log(high))))
    return repr(rng.uniform(low, high))


def sample(rng: random.Random, ranges: Mapping[str, Any]) -> dict[str, str]:
    """One Random-strategy draw: a value per range, as the string SageMaker hands the trial."""
    values: dict[str, str] = {}
    for spec in ranges.get("IntegerParameterRanges", []):
        values[spec["Name"]] = _sample_integer(rng, spec)
    for spec in ranges.get("ContinuousParameterRanges", []):
        values[spec["Name"]] = _sample_continuous(rng, spec)
    for spec in ranges.get("CategoricalParameterRanges", []):
        values[spec["Name"]] = rng.choice(list(spec["Values"]))
    return dict(sorted(values.items()))


def trial_request(
    definition: Mapping[str, Any], name: str, tuned: Mapping[str, str], tags: list | None, *, objective_metric: str
) -> dict[str, Any]:
    """The CreateTrainingJob request SageMaker makes for one trial."""
    request = {
        k: v
        for k, v in definition.items()
        if k not in ("StaticHyperParameters", "HyperParameterRanges", "TuningObjective", "DefinitionName")
    }
    request["TrainingJobName"] = name
    request["HyperParameters"] = {
        **dict(definition.get("StaticHyperParameters") or {}),
        **tuned,
        "_tuning_objective_metric": objective_metric,
    }
    if tags:
        request["Tags"] = list(tags)
    return request


def plan(request: Mapping[str, Any], *, max_trials: int) -> TuningPlan:
    """The trials of `request` (Random strategy only; the pruning workflow uses it)."""
    config = request["HyperParameterTuningJobConfig"]
    if config.get("Strategy", "Bayesian") != "Random":
        raise ValueError(f"tuning strategy {config.get('Strategy')} is not emulated (Random is)")
    name = request["HyperParameterTuningJobName"]
    objective = config["HyperParameterTuningJobObjective"]
    count = min(int(config["ResourceLimits"]["MaxNumberOfTrainingJobs"]), max_trials)
    rng = random.Random(int(hashlib.sha256(name.encode()).hexdigest()[:16], 16))
    result = TuningPlan(name, objective["MetricName"], objective["Type"])
    for index in range(1, count + 1):
        tuned = sample(rng, config.get("ParameterRanges", {}))
        trial_name = f"{name}-{index:03d}-{rng.getrandbits(32):08x}"
        result.trials.append(
            Trial(
                trial_name,
                tuned,
                trial_request(
                    request["TrainingJobDefinition"],
                    trial_name,
                    tuned,
                    request.get("Tags"),
                    objective_metric=objective["MetricName"],
                ),
            )
        )
    return result


def best(trials: list[Trial], objective_type: str) -> Trial | None:
    scored = [t for t in trials if t.objective is not None]
    if not scored:
        return None
    return (min if objective_type == "Minimize" else max)(scored, key=lambda t: t.objective)
