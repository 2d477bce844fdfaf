"""What a SageMaker job hands each script, as the scripts see it (standard library only).

The CDK stack writes each job's ``HyperParameters``; the SageMaker training toolkit turns them into the
script's command line and the input channels into ``SM_CHANNEL_<NAME>`` variables. A contract test can
run exactly that through the script's own parser (``check_command_line``) without training anything, so
a flag the stack forgets or misspells fails a test instead of the cloud job.
"""

from __future__ import annotations

import contextlib
import importlib
import json
import os
from collections.abc import Iterator, Mapping

# Script -> the functions ("module:function", each taking argv) that parse its command line, in order.
# export_models.py parses its own flags and hands the rest to export_subnetwork.py's parser.
PARSERS: dict[str, tuple[str, ...]] = {
    "train_supernetwork.py": ("train_supernetwork:parse_args",),
    "evaluate_subnetwork.py": ("evaluate_subnetwork:parse_args",),
    "search_subnetworks.py": ("search_subnetworks:parse_args",),
    "select_pareto.py": ("select_pareto:parse_args",),
    "select_tuning_job.py": ("select_tuning_job:parse_args",),
    "export_subnetwork.py": ("export_subnetwork:parse_args",),
    "export_models.py": ("export_models:parse_args", "export_subnetwork:parse_args"),
}

# Hyperparameters the jobs after the super-network must not set: trials and the search read them from
# the super-network's nas_supernet.json (a different value is refused), so a stack's config should not
# offer them for those jobs and must pass them to train_supernetwork.py only.
SUPERNET_RECORDED = ("dataset", "split-seed", "validation-fraction")

# Keys of HyperParameters that the training toolkit consumes itself instead of passing them on.
TOOLKIT_KEYS_PREFIX = "sagemaker_"


def toolkit_value(raw: str) -> str:
    """SageMaker stores every hyperparameter as a string; the toolkit JSON-decodes each one where it can
    (so ``"\\"2\\""`` becomes ``2``) and passes ``str(value)``, with booleans as ``True``/``False``."""
    try:
        value = json.loads(raw)
    except (TypeError, ValueError):
        return str(raw)
    return str(value)


def sagemaker_argv(hyperparameters: Mapping[str, str]) -> list[str]:
    """The script arguments of a job with these ``HyperParameters`` (``--name value``, sorted by name,
    ``sagemaker_*`` keys left out), as the SageMaker training toolkit builds them."""
    argv: list[str] = []
    for name in sorted(hyperparameters):
        if not name.startswith(TOOLKIT_KEYS_PREFIX):
            argv += [f"--{name}", toolkit_value(hyperparameters[name])]
    return argv


def tuned_values(parameter_ranges: Mapping[str, list]) -> dict[str, str]:
    """One value of every tuned hyperparameter (each range's maximum / last value), as a trial gets it."""
    values = {r["Name"]: r["MaxValue"] for r in parameter_ranges.get("IntegerParameterRanges", [])}
    values.update({r["Name"]: r["Values"][-1] for r in parameter_ranges.get("CategoricalParameterRanges", [])})
    return values


@contextlib.contextmanager
def job_environment(channels: Mapping[str, str], extra: Mapping[str, str] | None = None) -> Iterator[None]:
    """``SM_CHANNEL_<NAME>`` for each channel folder (plus ``extra``) for the duration of the block."""
    variables = {f"SM_CHANNEL_{name.upper()}": path for name, path in channels.items()}
    variables.update(extra or {})
    saved = {name: os.environ.get(name) for name in variables}
    os.environ.update(variables)
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def check_command_line(
    script: str,
    hyperparameters: Mapping[str, str],
    channels: Mapping[str, str],
    extra_environment: Mapping[str, str] | None = None,
) -> list:
    """Parses ``hyperparameters`` with ``script``'s own parsers in the job's environment; returns what
    each parser returned. An argparse error raises ``SystemExit`` (exit status 2), as it would in the job.

    ``channels`` map channel names to local folders standing in for ``/opt/ml/input/data/<name>`` (e.g.
    a super-network folder for ``model``); the scripts directory must be on ``sys.path``."""
    if hyperparameters.get("sagemaker_program", script) != script:
        raise ValueError(f"the job runs {hyperparameters['sagemaker_program']}, not {script}")
    argv = sagemaker_argv(hyperparameters)
    results = []
    with job_environment(channels, extra_environment):
        for target in PARSERS[script]:
            module_name, _, function = target.partition(":")
            parsed = getattr(importlib.import_module(module_name), function)(argv)
            results.append(parsed)
            if isinstance(parsed, tuple) and len(parsed) == 2 and isinstance(parsed[1], list):
                argv = parsed[1]  # parse_known_args: the rest goes to the next parser
    return results
