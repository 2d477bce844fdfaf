"""The pruning state machine: super-network job, tuning job (trials), Pareto selection job, export job.

    ValidateInput -> StartTime -> Prepare -> TrainSupernet -> Tune -> SelectPareto -> Export -> RecordModel -> Done
                 \\-> InvalidInput -> Notify -> Failed          (every task: API retries, then Catch -> Notify)

After each job a `<Step>Completed` Choice goes on only when the job ended Completed (the tuning job: Completed
with a scored trial, i.e. a BestTrainingJob that completed); anything else -> `<Step>NotCompleted` -> Notify.

No Lambda: the selection step is a SageMaker job running `select_tuning_job.py`, which reads every trial
through the SageMaker API (by job name) and writes trials.json/.csv, pareto.json and pareto_front.png to
`pruning/<run>/`; the export job writes the pruned model (and the unpruned one, packaged the same way).

Names: the run is `<prefix>-<execution start time as 17 digits>` (a tuning job name allows 32 characters, too
few for the training stack's 32-digit hash); jobs are `<run>-<step>-<API retry>`, the tuning job `<run>-<retry>`,
its trials `<run>-<retry>-NNN-xxxxxxxx` (SageMaker's), so every job stays under the `<prefix>-*` IAM scope.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from aws_cdk import aws_kms as kms
from aws_cdk import aws_sns as sns
from aws_cdk import aws_ssm as ssm
from aws_cdk import aws_stepfunctions as sfn
from constructs import Construct

from ..shared.bucket_layout import PRUNING_DATASETS_PREFIX
from ..shared.job_access import JobAccess
from ..shared.job_request import TrainingJobRequest
from ..shared.sagemaker_job_step import TRAINING_JOB, TUNING_JOB, JobOutput, SageMakerJobStep
from ..shared.workflow_shell import failure_path, in_order, logged_state_machine, record_model_task
from .jobs import EXPORT, SELECTION, SUPERNET, TUNING
from .run_names import run_name_expression, run_uri, tuning_job_name

if TYPE_CHECKING:
    from .jobs import PruningJobs

# The tuning job's fields that are not its TrainingJobDefinition (CreateTrainingJob-only keys are dropped).
_NOT_IN_DEFINITION = ("TrainingJobName", "HyperParameters", "Tags")
# What a job's model folder is, from its DescribeTrainingJob answer (uncompressed output).
MODEL_FOLDER = "States.Format('{}{}/output/model/', $.OutputDataConfig.S3OutputPath, $.TrainingJobName)"


def training_parameters(request: TrainingJobRequest, *, output: str, compression: str = "NONE") -> dict[str, Any]:
    """CreateTrainingJob Parameters with the output under this run's prefix (an intrinsic)."""
    params = request.to_asl()
    out = params["OutputDataConfig"]
    out.pop("S3OutputPath")
    out["S3OutputPath.$"] = output
    out["CompressionType"] = compression
    return params


@dataclass(frozen=True)
class RunJobRequest:
    """A job of the run: `request` with its output under the run's prefix (`output`, an intrinsic)."""

    request: TrainingJobRequest
    output: str
    compression: str = "NONE"

    @property
    def role_arn(self) -> str | None:
        return self.request.role_arn

    @property
    def kms_key_arn(self) -> str:
        return self.request.kms_key_arn

    @property
    def access(self) -> JobAccess:
        return self.request.access

    def with_role(self, role_arn: str) -> RunJobRequest:
        return replace(self, request=self.request.with_role(role_arn))

    def to_asl(self) -> dict[str, Any]:
        return training_parameters(self.request, output=self.output, compression=self.compression)


@dataclass(frozen=True)
class TuningJobRequest:
    """CreateHyperParameterTuningJob: Random search; each trial is `trial` with the tuned flags."""

    trial: TrainingJobRequest
    output: str
    parameter_ranges: Mapping[str, Any]
    objective_metric: str
    max_jobs: int
    max_parallel_jobs: int

    @property
    def role_arn(self) -> str | None:
        return self.trial.role_arn

    @property
    def kms_key_arn(self) -> str:
        return self.trial.kms_key_arn

    @property
    def access(self) -> JobAccess:
        """The trials': every trial runs as the tuning job's definition says."""
        return self.trial.access

    def with_role(self, role_arn: str) -> TuningJobRequest:
        return replace(self, trial=self.trial.with_role(role_arn))

    def to_asl(self) -> dict[str, Any]:
        trial = training_parameters(self.trial, output=self.output)
        definition = {k: v for k, v in trial.items() if k.removesuffix(".$") not in _NOT_IN_DEFINITION}
        definition["StaticHyperParameters"] = trial["HyperParameters"]
        params: dict[str, Any] = {
            "HyperParameterTuningJobName.$": tuning_job_name(),
            "HyperParameterTuningJobConfig": {
                "Strategy": "Random",
                "HyperParameterTuningJobObjective": {"Type": "Minimize", "MetricName": self.objective_metric},
                "ResourceLimits": {
                    "MaxNumberOfTrainingJobs": self.max_jobs,
                    "MaxParallelTrainingJobs": self.max_parallel_jobs,
                },
                "ParameterRanges": dict(self.parameter_ranges),
                "TrainingJobEarlyStoppingType": "Off",
            },
            "TrainingJobDefinition": definition,
        }
        if "Tags" in trial:
            params["Tags"] = trial["Tags"]
        return params


class PruningWorkflow(Construct):
    """The state machine, its log group and its role (a customer-managed policy listing every permission)."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        bucket_name: str,
        run_prefix: str,
        jobs: PruningJobs,
        parameter_ranges: Mapping[str, Any],
        objective_metric: str,
        max_jobs: int,
        max_parallel_jobs: int,
        topic: sns.ITopic,
        model_parameter: ssm.IStringParameter,
        log_retention_days: int,
        key: kms.IKey,
    ) -> None:
        """Every job writes under the run's `jobs/` prefix; `run_prefix` starts every job name (the IAM scope)."""
        super().__init__(scope, construct_id)
        self._prefix = run_prefix
        jobs_uri = run_uri(bucket_name, "jobs/")
        start, start_time = self._validated_start(bucket_name, topic)
        prepare = sfn.Pass(self, "Prepare", parameters={"name.$": run_name_expression(run_prefix)}, result_path="$.run")
        tuning = TuningJobRequest(
            jobs.trial,
            jobs_uri,
            parameter_ranges=parameter_ranges,
            objective_metric=objective_metric,
            max_jobs=max_jobs,
            max_parallel_jobs=max_parallel_jobs,
        )
        steps = self._job_steps(jobs, tuning, jobs_uri)
        record = record_model_task(
            self, model_parameter=model_parameter, value_path=EXPORT.model_s3_uri, notify=self._notify
        )
        done = self._done(bucket_name, model_parameter)
        in_order(start_time, prepare, *steps, record, done)
        self.state_machine = logged_state_machine(
            self,
            start=start,
            purpose="NAS pruning",
            comment="NAS pruning: super-network, tuning job, Pareto selection, export; model prefix to SSM",
            topic=topic,
            key=key,
            model_parameter=model_parameter,
            log_retention_days=log_retention_days,
            log_retention_setting="pruning.log_retention_days",
        )

    def _validated_start(self, bucket_name: str, topic: sns.ITopic) -> tuple[sfn.Choice, sfn.Pass]:
        """(the first state, the run's first step): input outside pruning-datasets/ goes to the failure path
        before any job starts, so a mistyped dataset costs no instance hours."""
        invalid, self._notify = failure_path(
            self,
            topic=topic,
            subject="Pruning failed",
            invalid_input_cause=(
                f'expected {{"train_data": "s3://{bucket_name}/{PRUNING_DATASETS_PREFIX}<folder>/"}} '
                "(train.jsonl, test.jsonl; not under datasets/, where uploads start QLoRA runs); see README, Pruning"
            ),
        )
        start_time = sfn.Pass(
            self,
            "StartTime",
            parameters={"parts.$": "States.StringSplit($$.Execution.StartTime, '-:T.Z')"},
            result_path="$.clock",
        )
        start = sfn.Choice(self, "ValidateInput").when(_valid_input(bucket_name), start_time).otherwise(invalid)
        return start, start_time

    def _job_steps(self, jobs: PruningJobs, tuning: TuningJobRequest, jobs_uri: str) -> list[SageMakerJobStep]:
        """Super-network, tuning job, Pareto selection, export: each hands the next its output in the state."""
        supernet = self._job(
            "TrainSupernet",
            RunJobRequest(jobs.supernet, jobs_uri),
            SUPERNET,
            "SupernetCompleted",
            values={"model_s3_uri.$": MODEL_FOLDER},
        )
        tune = self._job(
            "Tune", tuning, TUNING, "TuneCompleted", kind=TUNING_JOB, values={"trials.$": "$.TrainingJobStatusCounters"}
        )
        select = self._job("SelectPareto", RunJobRequest(jobs.select, jobs_uri), SELECTION, "SelectionCompleted")
        export = self._job(
            "Export",
            RunJobRequest(jobs.export, jobs_uri, compression="GZIP"),
            EXPORT,
            "ExportCompleted",
            values={"model_s3_uri.$": "$.ModelArtifacts.S3ModelArtifacts"},
        )
        return [supernet, tune, select, export]

    def _job(
        self,
        name: str,
        request: RunJobRequest | TuningJobRequest,
        output: JobOutput,
        completed_check: str,
        *,
        kind=TRAINING_JOB,
        values: Mapping[str, str] | None = None,
    ) -> SageMakerJobStep:
        return SageMakerJobStep(
            self,
            name,
            kind=kind,
            request=request,
            output=output,
            values=values,
            name_prefix=self._prefix,
            notify=self._notify,
            completed_check=completed_check,
        )

    def _done(self, bucket_name: str, model_parameter: ssm.IStringParameter) -> sfn.Pass:
        """The execution's output: where the run's results, front, plot and both models are."""
        return sfn.Pass(
            self,
            "Done",
            parameters={
                "run.$": "$.run.name",
                "results_s3_uri.$": run_uri(bucket_name),
                "pareto_s3_uri.$": run_uri(bucket_name, "pareto.json"),
                "plot_s3_uri.$": run_uri(bucket_name, "pareto_front.png"),
                "supernet_job.$": SUPERNET.job_name,
                "supernet_s3_uri.$": SUPERNET.model_s3_uri,
                "tuning_job.$": TUNING.field("name"),
                "trials.$": TUNING.field("trials"),
                "model_s3_uri.$": EXPORT.model_s3_uri,
                "base_model_s3_uri.$": run_uri(bucket_name, "base/model.tar.gz"),
                "model_parameter": model_parameter.parameter_name,
            },
        )


def _valid_input(bucket_name: str) -> sfn.Condition:
    """train_data is a string under this bucket's pruning-datasets/ (datasets/ belongs to the Training rule)."""
    return sfn.Condition.and_(
        sfn.Condition.is_present("$.train_data"),
        sfn.Condition.is_string("$.train_data"),
        sfn.Condition.string_matches("$.train_data", f"s3://{bucket_name}/{PRUNING_DATASETS_PREFIX}*"),
    )
