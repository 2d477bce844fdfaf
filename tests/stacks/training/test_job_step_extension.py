"""Extension cost: a new SageMaker job step in the training workflow lands as one file and at most 3 other edits.

A throw-away evaluation job (`Evaluate`, between the training job and the model registry) is written into a copy of
the repository: its unit, stacks/training/evaluation_job.py (the request and the step), then the two edits that
place it, in the workflow's happy path and in the stack that builds its request. In that copy the Training
stack synthesizes with cdk-nag on, the state machine runs Train -> Evaluate -> the registry, and its role may
create the new job and pass its role, all from the job-step construct (stacks/shared/sagemaker_job_step.py).

The step reads the merged model under models/, which the training role only writes. Its request names no role, so
the step makes one that reads what its channels name; handed a fixed role that cannot read models/ instead, the
synth stops on one line naming the step, the location and the missing action.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.stacks.serving.test_backend_registry import _copy_repository, _fingerprints

UNIT = "stacks/training/evaluation_job.py"
MAX_OTHER_FILES = 3

EVALUATION_JOB = '''
    """A throw-away evaluation job: the trained model scored on the held-out data before it is registered."""

    from __future__ import annotations

    from dataclasses import replace

    from aws_cdk import aws_stepfunctions as sfn
    from constructs import Construct

    from ..shared.job_request import Ref, S3Channel, TrainingJobRequest
    from ..shared.sagemaker_job_step import TRAINING_JOB, JobOutput, SageMakerJobStep
    from .state_paths import RUN, TRAIN_DATA, TRAINING

    EVALUATION = JobOutput("$.evaluation_job")


    def evaluation_request(training: TrainingJobRequest) -> TrainingJobRequest:
        """The training job's image on the merged model (under its output's prefix) and the dataset, under the
        run's name; no role: the step makes one from these channels."""
        [data] = [c for c in training.channels if c.name == "training"]
        return replace(
            training,
            role_arn=None,
            job_name=Ref(f"States.Format('{{}}-e-{{}}', {RUN.name}, $$.State.RetryCount)"),
            channels=[
                S3Channel("model", Ref(TRAINING.model_s3_uri), training.output_scope),
                S3Channel("training", Ref(TRAIN_DATA), data.scope),
            ],
            max_wait_seconds=None,
            checkpoint_s3_uri=None,
            checkpoint_scope=None,
        )


    def evaluation_step(
        scope: Construct, *, request: TrainingJobRequest, name_prefix: str, notify: sfn.IChainable
    ) -> SageMakerJobStep:
        return SageMakerJobStep(
            scope,
            "Evaluate",
            kind=TRAINING_JOB,
            request=request,
            output=EVALUATION,
            name_prefix=name_prefix,
            notify=notify,
            completed_check="EvaluateCompleted",
        )
'''
# (file, anchor, replacement): each anchor must be in the file exactly once.
EDITS = (
    (
        "stacks/training/workflow.py",
        "from .input_checks import Check, dataset_marker, hyperparameter_checks\n",
        "from .evaluation_job import evaluation_step\n"
        "from .input_checks import Check, dataset_marker, hyperparameter_checks\n",
    ),
    (
        "stacks/training/workflow.py",
        "        benchmark: BenchmarkPlan | None = None,\n    ) -> None:",
        "        benchmark: BenchmarkPlan | None = None,\n        evaluation: TrainingJobRequest | None = None,\n"
        "    ) -> None:",
    ),
    (
        "stacks/training/workflow.py",
        "        in_order(checks, marker, *staged, defaults, prepare, train, *scored, registry,",
        "        evaluate = evaluation_step(self, request=evaluation, name_prefix=self._prefix, notify=notify)\n"
        "        in_order(checks, marker, *staged, defaults, prepare, train, *scored, evaluate, registry,",
    ),
    (
        "stacks/training/stack.py",
        "from .job import ",
        "from .evaluation_job import evaluation_request\nfrom .job import ",
    ),
    (
        "stacks/training/stack.py",
        "            distributed=training.distributed,\n",
        "            distributed=training.distributed,\n            evaluation=evaluation_request(self.request),\n",
    ),
)
SYNTH = """
import json, sys, tempfile
from pathlib import Path
sys.path.insert(0, ".")
from stacks.config import load_config
from tests.stacks.state_machine_requests import resolved_definitions
from tests.synth import synth, templates

with tempfile.TemporaryDirectory() as out:
    found = templates(synth(load_config("dev", Path("config")), Path(out)))
[definition] = [d for k, d in resolved_definitions(found).items() if k.startswith("Training/")]
policies = [r["Properties"]["PolicyDocument"] for r in found["Training"]["Resources"].values()
            if r["Type"] == "AWS::IAM::ManagedPolicy" and "state machine" in r["Properties"].get("Description", "")]
roles = {k: r["Properties"]["PolicyDocument"] for k, r in found["Training"]["Resources"].items()
         if r["Type"] == "AWS::IAM::ManagedPolicy" and k.startswith(("TrainingRole", "WorkflowEvaluateRole"))}
print(json.dumps({"states": definition["States"], "policies": policies, "roles": roles}))
"""
# The same copy, the step handed a fixed role that reads the dataset but not the model: app.py's one line.
HANDED_A_FIXED_ROLE = """
import sys, tempfile
from dataclasses import replace
sys.path.insert(0, ".")
from aws_cdk import Stack
import stacks.training.evaluation_job as unit
from stacks.shared.job_role import SageMakerJobRole

made = unit.evaluation_step

def handed(scope, *, request, name_prefix, notify):
    access = request.access
    reads = tuple(loc for loc in access.reads if loc.what != "channel 'model'")
    role = SageMakerJobRole(Stack.of(scope), "EvaluationRole", job_name_prefix=name_prefix, description="fixed",
                            policy_description="fixed", fixed=replace(access, reads=reads))
    return made(scope, request=replace(request, role_arn=role.role_arn), name_prefix=name_prefix, notify=notify)

unit.evaluation_step = handed
import app
from tests.synth import cli_context
with tempfile.TemporaryDirectory() as out:
    sys.exit(app.run({"env": "dev"}, outdir=out, context=cli_context()))
"""


def _edit(tree: Path, name: str, anchor: str, replacement: str) -> None:
    text = (tree / name).read_text()
    assert text.count(anchor) == 1, f"{name}: the anchor {anchor!r} moved; update this test's edit"
    (tree / name).write_text(text.replace(anchor, replacement))


@pytest.fixture(scope="module")
def evaluation_tree(tmp_path_factory) -> tuple[Path, list[str]]:
    """The repository copy with the evaluation step, and the files it touched outside its unit."""
    tree = tmp_path_factory.mktemp("evaluation-step")
    _copy_repository(tree)
    before = _fingerprints(tree)
    (tree / UNIT).write_text(textwrap.dedent(EVALUATION_JOB).lstrip())
    for edit in EDITS:
        _edit(tree, *edit)
    after = _fingerprints(tree)
    touched = sorted(n for n in after if before.get(n) != after[n])
    others = [n for n in touched if n != UNIT]
    print(f"an evaluation step touched {len(touched)} files: {touched}; outside its unit: {others}")
    return tree, others


def test_a_new_job_step_touches_at_most_three_files_outside_its_unit(evaluation_tree):
    _, others = evaluation_tree
    assert others == ["stacks/training/stack.py", "stacks/training/workflow.py"]
    assert len(others) <= MAX_OTHER_FILES


@pytest.fixture(scope="module")
def synthesized(evaluation_tree) -> dict:
    """The copy's dev Training stack: the definition's states, the state machine's and the job roles' policies."""
    tree, _ = evaluation_tree
    done = subprocess.run([sys.executable, "-c", SYNTH], cwd=tree, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_the_new_step_runs_between_training_and_registration_with_its_grants(synthesized):
    found = synthesized
    states = found["states"]
    evaluate = states["Evaluate"]
    assert evaluate["Resource"].endswith(":states:::sagemaker:createTrainingJob.sync")
    assert evaluate["Parameters"]["TrainingJobName.$"].startswith("States.Format('{}-e-{}'")
    assert evaluate["ResultPath"] == "$.evaluation_job"
    assert [r["ErrorEquals"][0] for r in evaluate["Retry"]] == ["SageMaker.AmazonSageMakerException"]
    assert [c["Next"] for c in evaluate["Catch"]] == ["Notify"]
    assert evaluate["Next"] == "EvaluateCompleted"
    assert states["TrainCompleted"]["Choices"][0]["Next"] == "Evaluate"
    assert states["EvaluateCompleted"]["Choices"][0]["Next"] == "DescribeRun"  # the registry's first state
    assert states["EvaluateCompleted"]["Default"] == "EvaluateNotCompleted"
    [policy] = found["policies"]
    statements = {s.get("Sid"): s for s in policy["Statement"]}
    assert "sagemaker:CreateTrainingJob" in statements["OwnTrainingJobs"]["Action"]
    passed = json.dumps(statements["PassJobRoles"]["Resource"])
    assert "WorkflowEvaluateRole" in passed and "TrainingRole" in passed  # the step's own role, collected


def _reads(document: dict) -> list[str]:
    [reads] = [s for s in document["Statement"] if s.get("Sid") == "ReadInputs"]
    resources = reads["Resource"] if isinstance(reads["Resource"], list) else [reads["Resource"]]
    return sorted(r["Fn::Join"][1][-1] for r in resources)


def test_the_new_step_gets_a_role_that_reads_the_model_and_the_training_role_stays_as_it_was(synthesized):
    roles = synthesized["roles"]
    [evaluation] = [d for k, d in roles.items() if k.startswith("WorkflowEvaluateRole")]
    [training] = [d for k, d in roles.items() if k.startswith("TrainingRole")]
    assert _reads(evaluation) == ["/datasets/*", "/models/*"]
    assert _reads(training) == ["/checkpoints/*", "/datasets/*"]  # dev: no base-models/ channel


def test_the_new_step_handed_a_role_that_cannot_read_the_model_stops_the_synth_in_one_line(evaluation_tree):
    tree, _ = evaluation_tree
    done = subprocess.run(
        [sys.executable, "-c", HANDED_A_FIXED_ROLE], cwd=tree, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 2, done.stderr[-3000:]
    [line] = [each for each in done.stderr.splitlines() if each.startswith("job access error:")]
    assert line == (
        "job access error: llm-inf2-dev-Training/Workflow/Evaluate: its role llm-inf2-dev-Training/EvaluationRole "
        "lacks s3:GetObject on "
        "channel 'model' $.training.model_s3_uri (under models/*); give the step a role that allows it, or a "
        "request without a role so the step derives one"
    )
    assert "Traceback" not in done.stderr
