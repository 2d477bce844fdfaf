"""Multi-objective sub-network search in one process with Syne Tune's ask/tell interface.

Searchers: ``random`` (multi-objective random search) and ``morea`` (multi-objective regularized
evolution, Syne Tune's ``regularized_evolution`` searcher with non-dominated-sort priority). Each trial
record keeps its own configuration next to its metrics, and a failing trial is recorded as failed and
reported to the searcher with ``on_trial_error`` (the seed's results could misalign when a trial failed).
"""

from __future__ import annotations

import traceback
from collections.abc import Callable, Sequence

from nas_search_space import ModelDims, config_from_hyperparameters, parameter_specs

SEARCHERS = ("random", "morea")


def syne_tune_config_space(space: str, dims: ModelDims) -> dict:
    from syne_tune.config_space import choice, randint

    return {
        spec.name: choice(list(spec.choices)) if spec.is_categorical else randint(spec.low, spec.high)
        for spec in parameter_specs(space, dims)
    }


def make_scheduler(searcher: str, config_space: dict, objectives: Sequence[str], num_samples: int, seed: int):
    from syne_tune.optimizer.schedulers.ask_tell_scheduler import AskTellScheduler
    from syne_tune.optimizer.schedulers.single_fidelity_scheduler import SingleFidelityScheduler

    if searcher == "random":
        name, kwargs = "random_search", {}
    elif searcher == "morea":
        # The population must be smaller than the budget, or evolution never starts.
        population = max(4, min(50, num_samples // 3))
        name, kwargs = (
            "regularized_evolution",
            {
                "population_size": population,
                "sample_size": max(2, min(10, population // 3)),
            },
        )
    else:
        raise ValueError(f"unknown searcher {searcher!r}; expected one of {SEARCHERS}")
    base = SingleFidelityScheduler(
        config_space,
        metrics=list(objectives),
        do_minimize=True,
        searcher=name,
        random_seed=seed,
        searcher_kwargs={"random_seed": seed, **kwargs},
    )
    return AskTellScheduler(base_scheduler=base)


def run_search(
    evaluate: Callable[[object], dict],
    space: str,
    dims: ModelDims,
    searcher: str,
    num_samples: int,
    objectives: Sequence[str],
    seed: int = 0,
    log: Callable[[str], None] = print,
) -> list[dict]:
    """Asks for ``num_samples`` configurations, scores each with ``evaluate(SubnetConfig)``, tells back."""
    scheduler = make_scheduler(searcher, syne_tune_config_space(space, dims), objectives, num_samples, seed)
    rows = []
    for _ in range(num_samples):
        trial = scheduler.ask()
        hyperparameters = {k: int(v) for k, v in trial.config.items()}
        row = {"trial_id": trial.trial_id, "hyperparameters": hyperparameters}
        try:
            subnet = config_from_hyperparameters(space, hyperparameters, dims)
            row["subnet"] = subnet.to_dict()
            metrics = evaluate(subnet)
            scheduler.tell(trial, {name: float(metrics[name]) for name in objectives})
            row.update(status="completed", **metrics)
        except Exception as error:  # a failed trial must not stop the search nor shift other results
            scheduler.base_scheduler.on_trial_error(trial)
            row.update(status="failed", error=f"{type(error).__name__}: {error}")
            log(traceback.format_exc())
        rows.append(row)
        log(
            f"trial {trial.trial_id}: {hyperparameters} -> "
            + ", ".join(f"{k}={row[k]}" for k in (*objectives, "status") if k in row)
        )
    return rows
