"""The training machine's input checks after ValidateInput's shape rules, each refusal with its own cause.

    ReadHyperparameters -> HyperparameterValues -> CountHyperparameters -> HyperparameterNames -> DatasetMarker
        -> (a completion marker) DatasetFolder -> UseDatasetFolder -> next
        -> (a file or a folder) next
    HyperparameterValues / HyperparameterNames / DatasetMarker --refused--> its Invalid* state -> Notify -> Failed

SageMaker's HyperParameters are a map of strings and train.py refuses a flag it does not know, both only after
the job was created (or its instance started): the machine refuses them first, without starting a job.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from aws_cdk import aws_stepfunctions as sfn
from constructs import Construct

from ..shared.bucket_layout import DATASET_READY_MARKER, DATASETS_PREFIX

# Every known name mapped to this placeholder: the JSON text of {**overrides, **known} then has exactly one
# comma-free `"name":"k"` entry per known name, and an unknown name adds at least one more.
KNOWN = "k"
_JSON_PATH_NAME = re.compile(r"[a-z][a-z0-9_]*")


def _refusal(scope: Construct, construct_id: str, cause: str) -> sfn.Pass:
    """An InvalidInput error with `cause` (an intrinsic) into `$.error`; Check.then sends it on to Notify."""
    return sfn.Pass(scope, construct_id, parameters={"Error": "InvalidInput", "Cause.$": cause}, result_path="$.error")


def _values_are_strings(names: Sequence[str]) -> sfn.Condition:
    """`$.hyperparameters` is an object and each known name is absent or a string. Per-name IsString rather
    than a pattern on the JSON text (`*":1*`, `*":true*`, ...): a pattern would also refuse a string value that
    contains `":1` (a chat template can), and would depend on how JsonToString spaces its output (moto writes
    it compact; AWS does not document it). Unknown names are HyperparameterNames' to refuse, whatever value."""
    return sfn.Condition.and_(
        sfn.Condition.string_matches("$.check.text", "{*"),
        *(
            sfn.Condition.or_(
                sfn.Condition.not_(sfn.Condition.is_present(f"$.hyperparameters.{name}")),
                sfn.Condition.is_string(f"$.hyperparameters.{name}"),
            )
            for name in names
        ),
    )


@dataclass(frozen=True)
class Check:
    """A check's first state, its refusals, and how a passing input goes on. `then` places the check in the path:
    the refusals join Notify there, after the job steps' catches (Step Functions' definition lists the states in
    the order CDK first reaches them, which follows the order states were linked to Notify)."""

    start: sfn.State
    refusals: tuple[sfn.Pass, ...]
    notify: sfn.IChainable
    passes: Callable[[sfn.IChainable], object]

    def then(self, next_state: sfn.IChainable) -> sfn.IChainable:
        for refusal in self.refusals:
            refusal.next(self.notify)
        self.passes(next_state)
        return next_state


def hyperparameter_checks(scope: Construct, *, names: Sequence[str], notify: sfn.IChainable) -> Check:
    """`ReadHyperparameters` ... `HyperparameterNames` -> then; `names`: what train.py accepts."""
    bad = [name for name in names if not _JSON_PATH_NAME.fullmatch(name)]
    if bad:
        raise ValueError(f"train.py flag {bad[0]!r} cannot be a JSONPath field of $.hyperparameters")
    read = sfn.Pass(
        scope,
        "ReadHyperparameters",
        parameters={"text.$": "States.JsonToString($.hyperparameters)", "known": dict.fromkeys(names, KNOWN)},
        result_path="$.check",
    )
    count = sfn.Pass(
        scope,
        "CountHyperparameters",
        parameters={
            # StringSplit drops nothing a known entry could lose: each has no comma, so the count is exact.
            "count.$": "States.ArrayLength(States.StringSplit(States.JsonToString("
            "States.JsonMerge($.hyperparameters, $.check.known, false)), ','))",
            "text.$": "$.check.text",  # for the refusal's cause; the known names are not carried further
        },
        result_path="$.check",
    )
    values_refused = _refusal(
        scope,
        "InvalidHyperparameterValue",
        "States.Format('hyperparameters must be an object of name: string value (SageMaker passes strings "
        "only: write 16 as the string 16, true as the string true); got {}', $.check.text)",
    )
    names_refused = _refusal(
        scope,
        "UnknownHyperparameter",
        "States.Format('hyperparameters: a name train.py does not accept (it accepts "
        + ", ".join(names)
        + "); got {}', $.check.text)",
    )
    values = sfn.Choice(scope, "HyperparameterValues").when(_values_are_strings(names), count)
    values.otherwise(values_refused)
    known_only = sfn.Condition.number_equals("$.check.count", len(names))
    names_known = sfn.Choice(scope, "HyperparameterNames").otherwise(names_refused)
    count.next(names_known)
    read.next(values)
    return Check(
        start=read,
        refusals=(values_refused, names_refused),
        notify=notify,
        passes=lambda next_state: names_known.when(known_only, next_state),
    )


def dataset_marker(scope: Construct, *, bucket_name: str, notify: sfn.IChainable) -> Check:
    """`DatasetMarker`: `train_data` `s3://<bucket>/datasets/<name>/_READY` (what the rule passes) becomes the
    folder `s3://<bucket>/datasets/<name>/` before going on; a file or folder goes on as it is; a marker
    anywhere else (deeper, or directly under datasets/) is refused."""
    datasets = f"s3://{bucket_name}/{DATASETS_PREFIX}"
    marker = f"/{DATASET_READY_MARKER}"
    one_level = sfn.Condition.and_(
        sfn.Condition.string_matches("$.train_data", f"{datasets}*{marker}"),
        sfn.Condition.not_(sfn.Condition.string_matches("$.train_data", f"{datasets}*/*{marker}")),
        sfn.Condition.not_(sfn.Condition.string_equals("$.train_data", f"{datasets}{marker}")),
    )
    # The name is the second-to-last '/' part whether or not StringSplit keeps the empty part of `s3://`.
    parts = "States.StringSplit($.train_data, '/')"
    folder = sfn.Pass(
        scope,
        "DatasetFolder",
        parameters={
            "train_data.$": f"States.Format('{datasets}{{}}/', "
            f"States.ArrayGetItem({parts}, States.MathAdd(States.ArrayLength({parts}), -2)))",
        },
        result_path="$.dataset",
    )
    # A Pass cannot write a string at $.train_data: merge {"train_data": folder} over the whole input instead.
    use_folder = sfn.Pass(
        scope,
        "UseDatasetFolder",
        parameters={"input.$": "States.JsonMerge($, $.dataset, false)"},
        output_path="$.input",
    )
    folder.next(use_folder)
    refused = _refusal(
        scope,
        "InvalidDatasetMarker",
        f"States.Format('a dataset completion marker must be {datasets}<name>{marker}: one folder under "
        f"{DATASETS_PREFIX} with the shards beside the marker; got {{}}', $.train_data)",
    )
    choice = (
        sfn.Choice(scope, "DatasetMarker")
        .when(one_level, folder)
        .when(sfn.Condition.string_matches("$.train_data", f"*{marker}"), refused)
    )

    def passes(next_state: sfn.IChainable) -> None:
        use_folder.next(next_state)
        choice.otherwise(next_state)

    return Check(start=choice, refusals=(refused,), notify=notify, passes=passes)
