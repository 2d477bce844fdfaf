"""moto's ASL interpreter with SageMaker's `.sync` answered by a job that ended as a test says.

moto 5.2 stops at `createTrainingJob.sync`. `JobOutcomes` registers a SageMaker integration in the interpreter's
own factory (the hook local/emulator/sagemaker_sync.py uses): it sends the real Create* call to moto's SageMaker,
records the end the test names for that job (status, secondary status, transitions, e.g. Stopped /
MaxRuntimeExceeded as SageMaker ends a job past MaxRuntimeInSeconds; the metrics it logged; for a completed
training job, the model_facts.json train.py leaves in the model folder) and returns moto's own Describe* answer,
as `.sync` does; an outcome of Failed fails the task with States.TaskFailed, as `.sync` does.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from datetime import UTC, datetime

import boto3
from moto.sagemaker import models as sagemaker_models
from moto.stepfunctions.parser.asl.component.state.exec.state_task import state_task_factory
from moto.stepfunctions.parser.asl.component.state.exec.state_task.service import state_task_service_factory
from moto.stepfunctions.parser.asl.component.state.exec.state_task.service.resource import ResourceCondition
from moto.stepfunctions.parser.asl.component.state.exec.state_task.service.state_task_service_callback import (
    StateTaskServiceCallback,
)
from moto.stepfunctions.parser.asl.utils.boto_client import boto_client_for
from moto.stepfunctions.parser.asl.utils.encoding import to_json_str

from local.emulator.execution_patches import definitions_parsed_once
from local.emulator.sagemaker_sync import sync_task_failed
from tests.stacks.model_folder import model_facts_body

definitions_parsed_once()  # as the emulator runs the interpreter: each definition's ASL parsed once per process

# A completed QLoRA job logs train.py's held-out figures (the gate's metric among them, above every config's
# minimum) and leaves its merged model folder, model_facts.json included, under models/<job>/output/model/.
TRAINED_METRICS = {"eval_loss_base": 3.2, "eval_loss_merged": 1.1, "eval_loss_improvement": 2.1}
COMPLETED = {
    "status": "Completed",
    "secondary": "Completed",
    "message": "Training job completed",
    "metrics": TRAINED_METRICS,
}
# A completed benchmark job (training_code/qlora/benchmark.py) logs the gate's figure, within every config's bound.
BENCHMARK_PROGRAM = "benchmark.py"
BENCHMARKED = {**COMPLETED, "metrics": {"benchmark_max_drop_points": 1.25}}
# A completed LMI partition (its output folder names the shape and compiler) leaves config.json with the `neuron`
# section transformers-neuronx's loader writes (djl-serving 0.30.0-dlc neuron_utils/model_loader.py).
LMI_FOLDER = re.compile(r"/neuron/tp(\d+)-np(\d+)-bs(\d+)-(fp16|bf16|fp32)-neuronx-cc-([\d.]+)/$")
# SageMaker's end for a job that runs past StoppingCondition.MaxRuntimeInSeconds.
MAX_RUNTIME_EXCEEDED = {
    "status": "Stopped",
    "secondary": "MaxRuntimeExceeded",
    "message": "Training job stopped after exceeding MaxRuntimeInSeconds",
}


class _Outcomes(StateTaskServiceCallback):
    outcomes: Mapping[str, dict] = {}  # job name substring -> outcome (first match; else COMPLETED)
    tuning: Mapping[str, dict] = {}  # tuning job name substring -> DescribeHyperParameterTuningJob fields

    def __init__(self) -> None:
        # moto's callback base class sets up its endpoint only when waitForTaskToken is listed too
        super().__init__(supported_integration_patterns={ResourceCondition.WaitForTaskToken, ResourceCondition.Sync})

    def _get_supported_parameters(self):
        return set()

    def _eval_service_task(self, env, resource_runtime_part, normalised_parameters, state_credentials):
        client = boto_client_for(
            region=resource_runtime_part.region, service="sagemaker", state_credentials=state_credentials
        )
        response = getattr(client, self._get_boto_service_action())(**normalised_parameters)
        response.pop("ResponseMetadata", None)
        env.stack.append(response)

    def _build_sync_resolver(self, env, resource_runtime_part, normalised_parameters, state_credentials):
        part = resource_runtime_part
        env.stack.pop()  # the Create* answer; the result is the job's description
        backend = sagemaker_models.sagemaker_backends[part.account][part.region]

        def resolve() -> dict:
            if "TrainingJobName" in normalised_parameters:
                description, failed = self._end_training_job(backend, normalised_parameters["TrainingJobName"])
            else:
                description, failed = self._end_tuning_job(backend, normalised_parameters)
            description = json.loads(to_json_str(description))
            if failed:
                raise sync_task_failed(self, env, description)
            return description

        return resolve

    def _end_training_job(self, backend, name: str) -> tuple[dict, bool]:
        job = backend.training_jobs[name]
        benchmark = (job.hyper_parameters or {}).get("sagemaker_program") == BENCHMARK_PROGRAM
        outcome = next((o for key, o in self.outcomes.items() if key in name), BENCHMARKED if benchmark else COMPLETED)
        now = datetime.now(UTC)
        job.training_job_status, job.secondary_status = outcome["status"], outcome["secondary"]
        job.failure_reason = outcome.get("failure_reason")
        job.secondary_status_transitions = [
            {
                "Status": "Training",
                "StartTime": now,
                "EndTime": now,
                "StatusMessage": "Training image download completed. Training in progress.",
            },
            {"Status": outcome["secondary"], "StartTime": now, "StatusMessage": outcome["message"]},
        ]
        if outcome.get("metrics"):
            job.final_metric_data_list = [
                {"MetricName": k, "Value": v, "Timestamp": now} for k, v in outcome["metrics"].items()
            ]
        output = job.output_data_config["S3OutputPath"]
        if outcome["status"] == "Completed" and output.endswith("/models/"):  # the training job, not the compile job
            bucket = output.removeprefix("s3://").split("/", 1)[0]
            key = f"models/{name}/output/model/model_facts.json"
            body = model_facts_body((job.hyper_parameters or {}).get("model_id", "/opt/ml/input/data/model"))
            boto3.client("s3", region_name=backend.region_name).put_object(Bucket=bucket, Key=key, Body=body)
        shape = LMI_FOLDER.search(output)
        if outcome["status"] == "Completed" and shape:  # LMI's partition: config.json records the compiled shape
            bucket, prefix = output.removeprefix("s3://").split("/", 1)
            tp, positions, batch, dtype, compiler = shape.groups()
            neuron = {
                "num_cores": int(tp),
                "sequence_length": int(positions),
                "batch_size": int(batch),
                "auto_cast_type": {"fp16": "f16", "bf16": "bf16", "fp32": "f32"}[dtype],
                "compiler_version": f"{compiler}+d3cfc8ca",
            }
            boto3.client("s3", region_name=backend.region_name).put_object(
                Bucket=bucket, Key=f"{prefix}{name}/output/model/config.json", Body=json.dumps({"neuron": neuron})
            )
        return backend.describe_training_job(name), outcome["status"] == "Failed"

    def _end_tuning_job(self, backend, params: dict) -> tuple[dict, bool]:
        name = params["HyperParameterTuningJobName"]
        fields = next((f for key, f in self.tuning.items() if key in name), {})
        job = backend.hyper_parameter_tuning_jobs[name]
        job.hyper_parameter_tuning_job_status = fields.get("status", "Completed")
        job.objective_status_counters = fields.get("objectives", {"Succeeded": 1, "Pending": 0, "Failed": 0})
        job.training_job_status_counters = fields.get(
            "trials", {"Completed": 1, "InProgress": 0, "RetryableError": 0, "NonRetryableError": 0, "Stopped": 0}
        )
        return backend.describe_hyper_parameter_tuning_job(name), job.hyper_parameter_tuning_job_status == "Failed"


@contextmanager
def job_outcomes(outcomes: Mapping[str, dict], tuning: Mapping[str, dict] | None = None) -> Iterator[None]:
    """Within: `.sync` SageMaker tasks end as `outcomes` (and `tuning`) say; moto as it ships afterwards."""
    original = state_task_service_factory.state_task_service_for

    def service_for(service_name: str):
        return _Outcomes() if service_name == "sagemaker" else original(service_name)

    _Outcomes.outcomes, _Outcomes.tuning = dict(outcomes), dict(tuning or {})
    state_task_service_factory.state_task_service_for = service_for
    state_task_factory.state_task_service_for = service_for
    try:
        yield
    finally:
        state_task_service_factory.state_task_service_for = original
        state_task_factory.state_task_service_for = original


def deploy_state_machine(aws: Mapping, units: dict, unit: str) -> tuple[str, dict]:
    """`unit`'s state machine on moto (tokens resolved as deployed), with the topic and SSM parameters it names:
    (ARN, {"bucket": the artifact bucket ValidateInput accepts, "parameters": [names, each set to "none"]})."""
    from tests.stacks.state_machine_requests import resolved_definitions

    (definition,) = [d for m, d in resolved_definitions(units).items() if m.startswith(f"{unit}/")]
    states = definition["States"]
    aws["sns"].create_topic(Name=states["Notify"]["Parameters"]["TopicArn"].rsplit(":", 1)[1])
    parameters = [s["Parameters"]["Name"] for s in states.values() if s.get("Resource", "").endswith("putParameter")]
    for name in parameters:
        aws["ssm"].put_parameter(Name=name, Value="none", Type="String", Overwrite=True)
    arn = aws["stepfunctions"].create_state_machine(
        name=f"{unit}-{abs(hash(json.dumps(definition))) % 10**8}",
        definition=json.dumps(definition),
        roleArn="arn:aws:iam::123456789012:role/workflow",
    )["stateMachineArn"]
    rules = json.dumps(states["ValidateInput"]["Choices"])
    bucket = rules.split('"StringMatches": "s3://', 1)[1].split("/", 1)[0]
    _registry_resources(aws, states, bucket)
    _staged_tasks(aws, states)
    return arn, {"bucket": bucket, "parameters": parameters}


def _registry_resources(aws: Mapping, states: dict, bucket: str) -> None:
    """What the Data stack holds for the registry steps: the versioned artifact bucket, the package group."""
    groups = {
        s["Parameters"]["ModelPackageGroupName"]
        for s in states.values()
        if s.get("Resource", "").endswith("createModelPackage")
    }
    if not groups:
        return
    aws["s3"].create_bucket(Bucket=bucket)
    aws["s3"].put_bucket_versioning(Bucket=bucket, VersioningConfiguration={"Status": "Enabled"})
    for group in groups:
        aws["sagemaker"].create_model_package_group(ModelPackageGroupName=group)


def _staged_tasks(aws: Mapping, states: dict) -> None:
    """The benchmark tasks' YAMLs the machine checks before any job (make eval-data's layout), where it has any."""
    for state in states.values():
        if state.get("Resource", "").endswith(":s3:headObject"):
            aws["s3"].put_object(**state["Parameters"], Body=b"task: staged\n")


def run_execution(aws: Mapping, machine: str, execution_input: dict, name: str) -> tuple[dict, list[dict]]:
    """Start, wait for the end: (DescribeExecution, history events)."""
    sfn = aws["stepfunctions"]
    arn = sfn.start_execution(stateMachineArn=machine, name=name, input=json.dumps(execution_input))["executionArn"]
    described = ended_execution(sfn, arn)
    return described, sfn.get_execution_history(executionArn=arn, maxResults=1000)["events"]


def ended_execution(sfn, execution_arn: str) -> dict:
    """DescribeExecution once the execution has left RUNNING (30 s at most)."""
    for _ in range(600):
        described = sfn.describe_execution(executionArn=execution_arn)
        if described["status"] != "RUNNING":
            return described
        time.sleep(0.05)
    raise AssertionError(f"{execution_arn} still running")


def entered(events: list[dict]) -> list[str]:
    return [e["stateEnteredEventDetails"]["name"] for e in events if "stateEnteredEventDetails" in e]
