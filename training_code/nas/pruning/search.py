"""Multi-objective sub-network search in one process with Syne Tune's ask/tell interface.

Searchers: ``random`` (multi-objective random search) and ``morea`` (multi-objective regularized
evolution, Syne Tune's ``MultiObjectiveRegularizedEvolution`` with non-dominated-sort priority). Both are
Syne Tune's classes with ``suggest`` overridden so every draw comes from the searcher's own seeded RNG, and
MOREA steps ordinal hyperparameters (heads) to a neighbouring value instead of resampling them. Each trial
record keeps its own configuration next to its metrics, and a failing trial is recorded as failed and
reported to the searcher with ``on_trial_error`` (the seed's results could misalign when a trial failed).
"""

from __future__ import annotations

import traceback
from collections.abc import Callable, Sequence

from .search_space import ModelDims, config_from_hyperparameters, parameter_specs
from .settings import SEARCHERS


def syne_tune_config_space(space: str, dims: ModelDims) -> dict:
    """Integer ranges as ``randint``; ordered choices (heads) as ``ordinal``, so mutations can step."""
    from syne_tune.config_space import ordinal, randint

    return {
        spec.name: ordinal(list(spec.choices), kind="equal") if spec.is_categorical else randint(spec.low, spec.high)
        for spec in parameter_specs(space, dims)
    }


def seeded_sample(config_space: dict, rng) -> dict:
    """A random configuration drawn from ``rng``: syne-tune 0.16's ``sample_random_config`` ignores the
    searcher's RNG (it draws from numpy's global state), so two runs with one seed differed."""
    return {k: v.sample(random_state=rng) if hasattr(v, "sample") else v for k, v in config_space.items()}


def mutate(config: dict, config_space: dict, rng) -> dict:
    """Changes one hyperparameter: an ordinal one moves to a neighbouring value (MOREA's local step), an
    integer range is resampled uniformly (syne-tune's ``mutate_config``)."""
    from syne_tune.config_space import Ordinal, non_constant_hyperparameter_keys

    child = dict(config)
    name = rng.choice(non_constant_hyperparameter_keys(config_space))
    domain = config_space[name]
    if isinstance(domain, Ordinal):
        values = list(domain.categories)
        index = values.index(config[name])
        steps = [i for i in (index - 1, index + 1) if 0 <= i < len(values)]
        child[name] = values[steps[rng.randint(len(steps))]]
        return child
    for _ in range(100):
        child[name] = domain.sample(random_state=rng)
        if child[name] != config[name]:
            break
    return child


def _seeded_searchers():
    """Syne Tune's multi-objective random search and MOREA, drawing every sample from their own RNG."""
    import numpy as np
    from syne_tune.optimizer.schedulers.multiobjective.multi_objective_regularized_evolution import (
        MultiObjectiveRegularizedEvolution,
    )
    from syne_tune.optimizer.schedulers.searchers.random_searcher import MultiObjectiveRandomSearcher

    class SeededRandomSearcher(MultiObjectiveRandomSearcher):
        def __init__(self, config_space, random_seed: int):
            super().__init__(config_space, random_seed=random_seed)
            self.random_state = np.random.RandomState(self.random_seed)

        def suggest(self, **kwargs) -> dict | None:
            initial = self._next_points_to_evaluate()
            return initial if initial is not None else seeded_sample(self.config_space, self.random_state)

    class SeededMOREA(MultiObjectiveRegularizedEvolution):
        def suggest(self, **kwargs) -> dict | None:
            initial = self._next_points_to_evaluate()
            if initial is not None:
                return initial
            if len(self.population) < self.population_size:
                return seeded_sample(self.config_space, self.random_state)
            candidates = self.random_state.choice(list(self.population), size=self.sample_size)
            parent = min(candidates, key=lambda element: element.score)
            return mutate(parent.config, self.config_space, self.random_state)

    return SeededRandomSearcher, SeededMOREA


def make_searcher(searcher: str, config_space: dict, num_samples: int, seed: int):
    random_searcher, morea = _seeded_searchers()
    if searcher == "random":
        return random_searcher(config_space, random_seed=seed)
    if searcher == "morea":
        # The population must be smaller than the budget, or evolution never starts.
        population = max(4, min(50, num_samples // 3))
        return morea(
            config_space,
            population_size=population,
            sample_size=max(2, min(10, population // 3)),
            random_seed=seed,
        )
    raise ValueError(f"unknown searcher {searcher!r}; expected one of {SEARCHERS}")


def make_scheduler(searcher: str, config_space: dict, objectives: Sequence[str], num_samples: int, seed: int):
    from syne_tune.optimizer.schedulers.ask_tell_scheduler import AskTellScheduler
    from syne_tune.optimizer.schedulers.single_fidelity_scheduler import SingleFidelityScheduler

    base = SingleFidelityScheduler(
        config_space,
        metrics=list(objectives),
        do_minimize=True,
        searcher=make_searcher(searcher, config_space, num_samples, seed),
        random_seed=seed,
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
