"""The benchmark job between the merge and the registry: lm-evaluation-harness on the merged model and its base.

    (before Defaults) StagedTask<i> -> ... -> next          <task>.yaml of every task is in the bucket, else
        --not there--> TaskNotStaged<i> -> Notify -> Failed  (no job has started)
    (after TrainCompleted) Benchmark -> BenchmarkCompleted? -> HasBenchmarkMetrics? -> BenchmarkMetricNames
        -> HasBenchmarkScore? -> BenchmarkScore -> WithinBenchmarkDrop? -> BenchmarkWithin | BenchmarkDropped
        (no `benchmark_max_drop_points` logged: BenchmarkNoScore) -> the registry
    (in the registry, after a version passed the loss gate) BenchmarkPassed? -> BenchmarkRejected?

The job is training_code/qlora/benchmark.py (finetune/benchmark/contract.py: channels, program, metric names) in
the training image from the training code asset: `model` the merged model under models/, `base` the base under
base-models/ (or, without one, the run's `model_id` hub id as the `base` hyperparameter, with the hub token's
secret where training has one), `tasks` the staged tasks under training.benchmark.staged_prefix. Its request
names no role: the step derives one that reads those channels and writes models/ (its output,
models/<training job>/benchmark/). The gate's figure is the job's `benchmark_max_drop_points` (the largest drop
of any task's primary metric, in points below the base); above training.quality_gate.max_benchmark_drop, or
missing, the version is registered Rejected.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from aws_cdk import Aws
from aws_cdk import aws_iam as iam
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_stepfunctions as sfn
from aws_cdk import aws_stepfunctions_tasks as tasks
from constructs import Construct

from ..code_contract.loader import load_code_module
from ..code_contract.qlora import hub_token_variable
from ..config.training import TrainingConfig
from ..paths import QLORA_CODE
from ..shared.job_access import S3Scope
from ..shared.job_request import Ref, S3Channel, TrainingJobRequest
from ..shared.sagemaker_job_step import TRAINING_JOB, JobOutput, SageMakerJobStep
from ..shared.state_grants import StateGrants
from .base_access import hub_token_secrets
from .outcomes import MODEL_REJECTED
from .registry_grants import REJECTED
from .state_paths import APPROVAL, RUN, TRAINING

CONTRACT = load_code_module(QLORA_CODE, "finetune/benchmark/contract.py")
BENCHMARK = JobOutput("$.benchmark")
GATE = "$.benchmark_gate"  # passed, max_drop_points, max_benchmark_drop, scores (benchmark.json's URI)
STAGED_REASON = (
    "The benchmark job reads the staged tasks (make eval-data writes each as <task>/<task>.yaml and its files "
    "under this prefix); the `tasks` channel downloads the folder; read only."
)


@dataclass(frozen=True)
class BenchmarkPlan:
    """What the workflow needs for the benchmark: the job's request, the tasks it checks are staged first, and
    the gate's bound (points)."""

    request: TrainingJobRequest
    tasks: tuple[str, ...]
    bucket_name: str
    bucket_arn: str
    staged_prefix: str
    max_drop: float


def benchmark_plan(
    training: TrainingConfig, *, bucket: s3.IBucket, job: TrainingJobRequest, submit_directory: str
) -> BenchmarkPlan | None:
    """The plan from the training job's request (image, code, key, placement, tags); None without tasks."""
    bench, drop = training.benchmark, training.quality_gate.max_benchmark_drop
    if not bench.tasks or drop is None:
        return None
    hyperparameters = {
        "sagemaker_program": CONTRACT.PROGRAM,
        "sagemaker_submit_directory": submit_directory,
        "sagemaker_region": Aws.REGION,
        "tasks": ",".join(bench.tasks),
    }
    channels = [S3Channel(CONTRACT.MODEL_CHANNEL, Ref(TRAINING.model_s3_uri), job.output_scope)]
    environment = None
    base = [c for c in job.channels if c.name == "model"]  # training's base under base-models/, if any
    if base:
        channels.append(replace(base[0], name=CONTRACT.BASE_CHANNEL))
    else:  # the run's own base (an execution may name another model_id), downloaded by its hub id; a `.$` key
        # anywhere in a task's Parameters is a path Step Functions resolves per execution
        hyperparameters["base.$"] = f"{RUN.hyperparameters}.model_id"
        if training.hub_token_secret is not None:
            environment = {hub_token_variable(): training.hub_token_secret}
    staged = S3Scope.under(bucket, bench.staged_prefix, STAGED_REASON)
    channels.append(S3Channel(CONTRACT.TASKS_CHANNEL, f"s3://{bucket.bucket_name}/{bench.staged_prefix}", staged))
    channels.extend(c for c in job.channels if c.name == "code")  # isolated: the code asset as a channel
    request = replace(
        job,
        role_arn=None,
        job_name=Ref(f"States.Format('{{}}-b-{{}}', {RUN.name}, $$.State.RetryCount)"),
        instance_type=bench.instance_type,
        instance_count=1,
        volume_size_gb=bench.volume_size_gb,
        output_s3_uri=Ref(f"States.Format('{job.output_s3_uri}{{}}/benchmark/', {TRAINING.job_name})"),
        secrets=hub_token_secrets(training) if environment else (),
        hyperparameters=hyperparameters,
        channels=channels,
        max_runtime_seconds=bench.max_runtime_hours * 3600,
        max_wait_seconds=None,
        checkpoint_s3_uri=None,
        checkpoint_scope=None,
        metric_definitions=CONTRACT.metric_definitions({}),  # the gate's figure; per task: benchmark.json
        environment=environment,
    )
    return BenchmarkPlan(
        request=request,
        tasks=tuple(bench.tasks),
        bucket_name=bucket.bucket_name,
        bucket_arn=bucket.bucket_arn,
        staged_prefix=bench.staged_prefix,
        max_drop=drop,
    )


class StagedTasks(Construct):
    """`StagedTask<i>`: S3 HeadObject of each task's `<staged_prefix><task>/<task>.yaml` before any job starts;
    a task not there ends the run in `TaskNotStaged<i>` with the job's own hint (make eval-data)."""

    def __init__(self, scope: Construct, construct_id: str, *, plan: BenchmarkPlan, notify: sfn.IChainable) -> None:
        super().__init__(scope, construct_id)
        self._keys = [f"{plan.staged_prefix}{task}/{task}.yaml" for task in plan.tasks]
        self._bucket_arn = plan.bucket_arn
        self.notify = notify
        heads, self.refusals = [], []
        for index, (task, key) in enumerate(zip(plan.tasks, self._keys, strict=True)):
            head = tasks.CallAwsService(
                self,
                f"StagedTask{index}",
                service="s3",
                action="headObject",
                iam_action="s3:GetObject",
                parameters={"Bucket": plan.bucket_name, "Key": key},
                iam_resources=[f"{plan.bucket_arn}/{key}"],  # the statements: state_machine_grants
                result_path=sfn.JsonPath.DISCARD,
            )
            hint = CONTRACT.STAGE_COMMAND.format(task=task)
            refused = sfn.Pass(
                self,
                f"TaskNotStaged{index}",
                parameters={
                    "Error": "InvalidInput",
                    # HeadObject without s3:ListBucket answers 403 for a missing key too: both read "not staged".
                    "Cause": f"benchmark task {task}: not staged: no s3://{plan.bucket_name}/{key}; stage it with "
                    f"`{hint}` (training.benchmark.tasks names it); no job was started",
                },
                result_path="$.error",
            )
            head.add_catch(refused, errors=["States.ALL"], result_path="$.error")
            if heads:
                heads[-1].next(head)
            heads.append(head)
            self.refusals.append(refused)
        self.start, self._last = heads[0], heads[-1]

    def then(self, next_state: sfn.IChainable) -> sfn.IChainable:
        for refusal in self.refusals:
            refusal.next(self.notify)
        self._last.next(next_state)
        return next_state

    def state_machine_grants(self) -> StateGrants:
        return StateGrants(
            [
                iam.PolicyStatement(
                    sid="CheckStagedTasks",  # HeadObject is authorized as s3:GetObject
                    actions=["s3:GetObject"],
                    resources=[f"{self._bucket_arn}/{key}" for key in self._keys],
                )
            ]
        )


class BenchmarkRun(Construct):
    """`Benchmark` (the job step) and the states that turn its logged `benchmark_max_drop_points` into the gate's
    verdict at `$.benchmark_gate`; `then(next_state)` goes on to the registry whatever the verdict (the registry
    registers the version with it)."""

    def __init__(
        self, scope: Construct, construct_id: str, *, plan: BenchmarkPlan, name_prefix: str, notify: sfn.IChainable
    ) -> None:
        super().__init__(scope, construct_id)
        self.step = SageMakerJobStep(
            scope,
            "Benchmark",
            kind=TRAINING_JOB,
            request=plan.request,
            output=BENCHMARK,
            values={
                "scores.$": "States.Format('{}{}/output/model/"
                f"{CONTRACT.SCORES_FILE}', $.OutputDataConfig.S3OutputPath, $.TrainingJobName)",
                # The whole description: FinalMetricDataList is absent for a job that logged no metric, and an
                # absent ResultSelector path fails the run with States.Runtime, which no Catch sees.
                "job.$": "$",
            },
            name_prefix=name_prefix,
            notify=notify,
            completed_check="BenchmarkCompleted",
        )
        self.start = self.step.start
        self._verdicts = self._verdict_states(plan.max_drop)
        self.step.then(self._first)

    def _verdict_states(self, max_drop: float) -> list[sfn.Pass]:
        metrics = f"{BENCHMARK.path}.job.FinalMetricDataList"
        fixed = {"max_benchmark_drop": f"{max_drop:g}", "scores.$": f"{BENCHMARK.path}.scores"}
        names = sfn.Pass(
            self,
            "BenchmarkMetricNames",
            parameters={"has.$": f"States.ArrayContains({metrics}[*].MetricName, '{CONTRACT.MAX_DROP}')"},
            result_path=GATE,
        )
        score = sfn.Pass(
            self,
            "BenchmarkScore",
            parameters={"values.$": f"{metrics}[?(@.MetricName == '{CONTRACT.MAX_DROP}')].Value"},
            result_path=GATE,
        )

        def verdict(construct_id: str, passed: bool, measured: str | None) -> sfn.Pass:
            drop = {"max_drop_points.$": measured} if measured else {"max_drop_points": "none"}
            return sfn.Pass(self, construct_id, parameters={"passed": passed, **drop, **fixed}, result_path=GATE)

        measured = f"States.Format('{{}}', {GATE}.values[0])"
        within, dropped = verdict("BenchmarkWithin", True, measured), verdict("BenchmarkDropped", False, measured)
        missing = verdict("BenchmarkNoScore", False, None)
        score.next(
            sfn.Choice(self, "WithinBenchmarkDrop")
            .when(sfn.Condition.number_less_than_equals(f"{GATE}.values[0]", max_drop), within)
            .otherwise(dropped)
        )
        names.next(
            sfn.Choice(self, "HasBenchmarkScore")
            .when(sfn.Condition.boolean_equals(f"{GATE}.has", True), score)
            .otherwise(missing)
        )
        self._first = (
            sfn.Choice(self, "HasBenchmarkMetrics").when(sfn.Condition.is_present(metrics), names).otherwise(missing)
        )
        return [within, dropped, missing]

    def then(self, next_state: sfn.IChainable) -> sfn.IChainable:
        for state in self._verdicts:
            state.next(next_state)
        return next_state


def benchmark_verdict(scope: Construct, next_state: sfn.IChainable) -> sfn.Choice:
    """`BenchmarkPassed?` after the loss gate passed a version: on only when the benchmark gate passed too, else
    `BenchmarkRejected` registers it Rejected (`$.approval.benchmark` says why, for ModelRejected's cause)."""
    rejected = sfn.Pass(
        scope,
        "BenchmarkRejected",
        parameters={
            "status": REJECTED,
            "improvement.$": f"{APPROVAL}.improvement",
            "min_improvement.$": f"{APPROVAL}.min_improvement",
            "benchmark": "rejected",
        },
        result_path=APPROVAL,
    )
    rejected.next(next_state)
    return (
        sfn.Choice(scope, "BenchmarkPassed")
        .when(sfn.Condition.boolean_equals(f"{GATE}.passed", True), next_state)
        .otherwise(rejected)
    )


def benchmark_metadata() -> dict[str, str]:
    """The package's CustomerMetadataProperties of the benchmark: the gate's figure and bound, benchmark.json."""
    return {
        CONTRACT.MAX_DROP: sfn.JsonPath.string_at(f"{GATE}.max_drop_points"),
        "quality_gate_max_benchmark_drop": sfn.JsonPath.string_at(f"{GATE}.max_benchmark_drop"),
        "benchmark_scores": sfn.JsonPath.string_at(f"{GATE}.scores"),
    }


def benchmark_rejection(scope: Construct, notify: sfn.IChainable, package_arn: str) -> tuple[sfn.Condition, sfn.Pass]:
    """GatePassed's branch for a version the benchmark gate rejected: its cause names the drop and the bound."""
    rejected = sfn.Pass(
        scope,
        "BenchmarkModelRejected",
        parameters={
            "Error": MODEL_REJECTED,
            "Cause.$": "States.Format('model package {} (training job {}) is registered Rejected by the quality "
            f"gate: {CONTRACT.MAX_DROP} {{}}, maximum {{}} (scores: {{}}); nothing is recorded for serving', "
            f"{package_arn}, {TRAINING.job_name}, {GATE}.max_drop_points, {GATE}.max_benchmark_drop, {GATE}.scores)",
        },
        result_path="$.error",
    )
    rejected.next(notify)
    return sfn.Condition.is_present(f"{APPROVAL}.benchmark"), rejected
