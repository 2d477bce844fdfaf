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

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from aws_cdk import Stack
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_sns as sns
from aws_cdk import aws_ssm as ssm
from aws_cdk import aws_stepfunctions as sfn
from constructs import Construct

from ..shared.bucket_layout import PRUNING_DATASETS_PREFIX
from ..shared.job_request import CREATE_TRAINING_JOB_SYNC, TrainingJobRequest
from ..shared.workflow_shell import (
    JOB_OUTCOME_SELECTOR,
    TUNING_OUTCOME_SELECTOR,
    failure_path,
    job_completed,
    logged_state_machine,
    record_model_task,
    retry_api_errors,
    tuning_completed,
)
from .run_names import run_name_expression, run_uri, tuning_job_name

if TYPE_CHECKING:
    from .jobs import PruningJobs

CREATE_TUNING_JOB_SYNC = "arn:{partition}:states:::sagemaker:createHyperParameterTuningJob.sync"
# The tuning job's fields that are not its TrainingJobDefinition (CreateTrainingJob-only keys are dropped).
_NOT_IN_DEFINITION = ("TrainingJobName", "HyperParameters", "Tags")


def training_parameters(request: TrainingJobRequest, *, output: str, compression: str = "NONE") -> dict[str, Any]:
    """CreateTrainingJob Parameters with the output under this run's prefix (an intrinsic)."""
    params = request.to_asl()
    out = params["OutputDataConfig"]
    out.pop("S3OutputPath")
    out["S3OutputPath.$"] = output
    out["CompressionType"] = compression
    return params


def tuning_parameters(
    request: TrainingJobRequest,
    *,
    output: str,
    parameter_ranges: Mapping[str, Any],
    objective_metric: str,
    max_jobs: int,
    max_parallel_jobs: int,
) -> dict[str, Any]:
    """CreateHyperParameterTuningJob Parameters: Random search; each trial is `request` with tuned flags."""
    trial = training_parameters(request, output=output)
    definition = {k: v for k, v in trial.items() if k.removesuffix(".$") not in _NOT_IN_DEFINITION}
    definition["StaticHyperParameters"] = trial["HyperParameters"]
    params: dict[str, Any] = {
        "HyperParameterTuningJobName.$": tuning_job_name(),
        "HyperParameterTuningJobConfig": {
            "Strategy": "Random",
            "HyperParameterTuningJobObjective": {"Type": "Minimize", "MetricName": objective_metric},
            "ResourceLimits": {"MaxNumberOfTrainingJobs": max_jobs, "MaxParallelTrainingJobs": max_parallel_jobs},
            "ParameterRanges": dict(parameter_ranges),
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
        role_statements: Sequence[iam.PolicyStatement],
    ) -> None:
        super().__init__(scope, construct_id)
        self._partition = Stack.of(self).partition
        jobs_uri = run_uri(bucket_name, "jobs/")
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
        prepare = sfn.Pass(self, "Prepare", parameters={"name.$": run_name_expression(run_prefix)}, result_path="$.run")
        train, tune, select, export = self._job_states(
            jobs,
            jobs_uri=jobs_uri,
            parameter_ranges=parameter_ranges,
            objective_metric=objective_metric,
            max_jobs=max_jobs,
            max_parallel_jobs=max_parallel_jobs,
        )
        record = record_model_task(
            self, model_parameter=model_parameter, value_path="$.export.model_s3_uri", notify=self._notify
        )
        done = self._done(bucket_name, model_parameter)
        record.next(done)
        export.next(self._completed("ExportCompleted", "$.export", record))
        select.next(self._completed("SelectionCompleted", "$.selection", export))
        tune.next(
            tuning_completed(self, "TuneCompleted", result_path="$.tuning", notify=self._notify, next_state=select)
        )
        train.next(self._completed("SupernetCompleted", "$.supernet", tune))
        chain = start_time.next(prepare).next(train)
        start = sfn.Choice(self, "ValidateInput").when(_valid_input(bucket_name), chain).otherwise(invalid)
        self.state_machine = logged_state_machine(
            self,
            start=start,
            purpose="NAS pruning",
            comment="NAS pruning: super-network, tuning job, Pareto selection, export; model prefix to SSM",
            role_statements=role_statements,
            topic=topic,
            key=key,
            model_parameter=model_parameter,
            log_retention_days=log_retention_days,
        )

    def _job_states(
        self,
        jobs: PruningJobs,
        *,
        jobs_uri: str,
        parameter_ranges: Mapping[str, Any],
        objective_metric: str,
        max_jobs: int,
        max_parallel_jobs: int,
    ) -> tuple[sfn.CustomState, sfn.CustomState, sfn.CustomState, sfn.CustomState]:
        """TrainSupernet, Tune, SelectPareto, Export: every job writes under the run's `jobs/` prefix."""
        model_folder = "States.Format('{}{}/output/model/', $.OutputDataConfig.S3OutputPath, $.TrainingJobName)"
        train = self._job(
            "TrainSupernet",
            CREATE_TRAINING_JOB_SYNC,
            training_parameters(jobs.supernet, output=jobs_uri),
            {"job_name.$": "$.TrainingJobName", **JOB_OUTCOME_SELECTOR, "model_s3_uri.$": model_folder},
            "$.supernet",
        )
        tune = self._job(
            "Tune",
            CREATE_TUNING_JOB_SYNC,
            tuning_parameters(
                jobs.trial,
                output=jobs_uri,
                parameter_ranges=parameter_ranges,
                objective_metric=objective_metric,
                max_jobs=max_jobs,
                max_parallel_jobs=max_parallel_jobs,
            ),
            {
                "name.$": "$.HyperParameterTuningJobName",
                **TUNING_OUTCOME_SELECTOR,
                "trials.$": "$.TrainingJobStatusCounters",
            },
            "$.tuning",
        )
        select = self._job(
            "SelectPareto",
            CREATE_TRAINING_JOB_SYNC,
            training_parameters(jobs.select, output=jobs_uri),
            {"job_name.$": "$.TrainingJobName", **JOB_OUTCOME_SELECTOR},
            "$.selection",
        )
        export = self._job(
            "Export",
            CREATE_TRAINING_JOB_SYNC,
            training_parameters(jobs.export, output=jobs_uri, compression="GZIP"),
            {
                "job_name.$": "$.TrainingJobName",
                **JOB_OUTCOME_SELECTOR,
                "model_s3_uri.$": "$.ModelArtifacts.S3ModelArtifacts",
            },
            "$.export",
        )
        return train, tune, select, export

    def _job(self, name: str, resource: str, parameters: dict, selector: dict, result_path: str) -> sfn.CustomState:
        """A `.sync` SageMaker task: API errors retried, anything else to Notify."""
        state = sfn.CustomState(
            self,
            name,
            state_json={
                "Type": "Task",
                "Resource": resource.format(partition=self._partition),
                "Parameters": parameters,
                "ResultSelector": selector,
                "ResultPath": result_path,
            },
        )
        retry_api_errors(state)
        state.add_catch(self._notify, errors=["States.ALL"], result_path="$.error")
        return state

    def _completed(self, name: str, result_path: str, next_state: sfn.IChainable) -> sfn.Choice:
        return job_completed(self, name, result_path=result_path, notify=self._notify, next_state=next_state)

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
                "supernet_job.$": "$.supernet.job_name",
                "supernet_s3_uri.$": "$.supernet.model_s3_uri",
                "tuning_job.$": "$.tuning.name",
                "trials.$": "$.tuning.trials",
                "model_s3_uri.$": "$.export.model_s3_uri",
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
