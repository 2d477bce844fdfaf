"""The benchmark job between the merge and the registry: its request and derived role on the synthesized templates;
on moto's interpreter, the run refused before any job when a task is not staged, and the quality gate registering
Rejected a version that lost more benchmark points than training.quality_gate.max_benchmark_drop allows.

Expected names (program, channels, metric, stage hint) come from the job program's own contract
(training_code/qlora/finetune/benchmark/contract.py), the bounds from config/<env>.yaml.
"""

from __future__ import annotations

import json
import logging
import re

import boto3
import pytest
from moto import mock_aws

from local.emulator.execution_patches import aws_sdk_answers_as_json
from stacks.code_contract.loader import load_code_module
from stacks.config import load_config
from stacks.paths import QLORA_CODE
from tests.stacks.job_outcomes import deploy_state_machine, entered, job_outcomes, run_execution
from tests.stacks.model_folder import model_facts_body
from tests.stacks.training.test_registry import BUCKET, BUCKET_TOKENS, IMAGE, SHARDS, _training_job
from tests.stacks.training.test_training_iam import policies
from tests.stacks.training.test_training_stack import definition
from tests.synth import ROOT

CONTRACT = load_code_module(QLORA_CODE, "finetune/benchmark/contract.py")
BENCHMARKED = ("staging", "prod")  # staging: the base by hub id; prod: from base-models/, isolated
CONFIGS = {env: load_config(env, ROOT / "config") for env in ("dev", *BENCHMARKED)}
REGION = "us-east-1"


def _states(templates, env: str) -> dict:
    return definition(templates[env]["Training"])["States"]


def test_an_environment_without_benchmark_tasks_runs_no_benchmark(templates):
    assert CONFIGS["dev"].training.benchmark.tasks == []
    names = list(_states(templates, "dev"))
    assert not [n for n in names if n.startswith(("Benchmark", "StagedTask", "TaskNotStaged"))]


@pytest.mark.parametrize("env", BENCHMARKED)
def test_the_benchmark_request_reads_the_merged_model_its_base_and_the_staged_tasks(templates, env):
    training = CONFIGS[env].training
    states = _states(templates, env)
    assert states["TrainCompleted"]["Choices"][0]["Next"] == "Benchmark"
    step = states["Benchmark"]
    assert step["Resource"].endswith(":states:::sagemaker:createTrainingJob.sync")
    params = step["Parameters"]
    assert params["RoleArn"].startswith("<getatt:WorkflowBenchmarkRole")
    assert params["TrainingJobName.$"] == "States.Format('{}-b-{}', $.run.name, $$.State.RetryCount)"
    channels = {c["ChannelName"]: c["DataSource"]["S3DataSource"] for c in params["InputDataConfig"]}
    assert channels[CONTRACT.MODEL_CHANNEL] == {
        "S3DataType": "S3Prefix",
        "S3DataDistributionType": "FullyReplicated",
        "S3Uri.$": "$.training.model_s3_uri",
    }
    assert channels[CONTRACT.TASKS_CHANNEL]["S3Uri"].endswith(f">/{training.benchmark.staged_prefix}")
    hyperparameters = params["HyperParameters"]
    assert hyperparameters["sagemaker_program"] == CONTRACT.PROGRAM
    assert hyperparameters["tasks"] == ",".join(training.benchmark.tasks)
    if training.base_model_key:  # the base the training job read, from the same folder
        assert channels[CONTRACT.BASE_CHANNEL]["S3Uri"].endswith(f">/{training.base_model_key}")
        assert "base.$" not in hyperparameters
    else:  # the run's own base, by its hub id
        assert CONTRACT.BASE_CHANNEL not in channels
        assert hyperparameters["base.$"] == "$.run.hyperparameters.model_id"
    expected = {CONTRACT.MODEL_CHANNEL, CONTRACT.TASKS_CHANNEL} | ({"base"} if training.base_model_key else set())
    assert set(channels) - {"code"} == expected
    output = params["OutputDataConfig"]
    assert re.fullmatch(r"States\.Format\('s3://<import:[^>]+>/models/\{\}/benchmark/', \$\.training\.job_name\)",
                        output["S3OutputPath.$"])  # fmt: skip
    assert output["CompressionType"] == "NONE"
    assert params["AlgorithmSpecification"]["MetricDefinitions"] == CONTRACT.metric_definitions({})
    assert params["ResourceConfig"]["InstanceType"] == training.benchmark.instance_type
    assert params["ResourceConfig"]["InstanceCount"] == 1
    assert params["ResourceConfig"]["VolumeSizeInGB"] == training.benchmark.volume_size_gb
    assert params["StoppingCondition"] == {"MaxRuntimeInSeconds": training.benchmark.max_runtime_hours * 3600}
    assert "CheckpointConfig" not in params and "EnableManagedSpotTraining" not in params


def _statement(template: dict, sid: str) -> dict | None:
    found = [
        s
        for logical_id, statements in policies(template).items()
        if logical_id.startswith("WorkflowBenchmarkRole")
        for s in statements
        if s.get("Sid") == sid
    ]
    return found[0] if found else None


def _prefixes(statement: dict) -> list[str]:
    resources = statement["Resource"] if isinstance(statement["Resource"], list) else [statement["Resource"]]
    return sorted(r["Fn::Join"][1][-1] for r in resources)


@pytest.mark.parametrize("env", BENCHMARKED)
def test_the_benchmark_role_reads_what_its_channels_name_and_writes_only_its_output(templates, env):
    training = CONFIGS[env].training
    template = templates[env]["Training"]
    reads = ["/eval-data/*", "/models/*"] + (["/base-models/*"] if training.base_model_key else [])
    assert _prefixes(_statement(template, "ReadInputs")) == sorted(reads)
    assert _prefixes(_statement(template, "WriteOutputs")) == ["/models/*"]
    assert _statement(template, "ReadHubTokenSecret") is None  # no environment names a hub token
    all_resources = json.dumps([s for ps in policies(template).items() if ps[0].startswith("WorkflowBenchmark")
                                for s in ps[1]])  # fmt: skip
    assert "/datasets/" not in all_resources and "/checkpoints/" not in all_resources


@pytest.fixture(scope="module")
def aws():
    logging.getLogger("moto").setLevel(logging.CRITICAL)
    aws_sdk_answers_as_json()
    with mock_aws(config={"stepfunctions": {"execute_state_machine": True}}):
        names = ("s3", "sagemaker", "sns", "ssm", "stepfunctions")
        yield {name: boto3.client(name, region_name=REGION) for name in names}


@pytest.fixture(scope="module")
def staging(aws, templates):
    """The whole staging Training machine, its task's YAML staged as make eval-data writes it."""
    return deploy_state_machine(aws, templates["staging"], "Training")


def _start(aws, machine: str, bucket: str, name: str) -> tuple[dict, list[dict]]:
    key = "datasets/guanaco/train.jsonl"
    aws["s3"].put_object(Bucket=bucket, Key=key, Body=b'{"text": "a row"}\n')
    return run_execution(aws, machine, {"train_data": f"s3://{bucket}/{key}", "hyperparameters": {}}, name)


def _jobs(aws) -> list[str]:
    return [j["TrainingJobName"] for j in aws["sagemaker"].list_training_jobs(MaxResults=100)["TrainingJobSummaries"]]


def test_a_task_not_staged_fails_the_run_before_any_job_starts(aws, staging):
    machine, names = staging
    [task] = CONFIGS["staging"].training.benchmark.tasks
    key = f"{CONFIGS['staging'].training.benchmark.staged_prefix}{task}/{task}.yaml"
    aws["s3"].delete_object(Bucket=names["bucket"], Key=key)
    before = _jobs(aws)
    try:
        execution, events = _start(aws, machine, names["bucket"], "not-staged")
    finally:
        aws["s3"].put_object(Bucket=names["bucket"], Key=key, Body=b"task: staged\n")
    assert execution["status"] == "FAILED" and execution["error"] == "InvalidInput"
    assert execution["cause"] == (
        f"benchmark task {task}: not staged: no s3://{names['bucket']}/{key}; stage it "
        f"with `{CONTRACT.STAGE_COMMAND.format(task=task)}` (training.benchmark.tasks names it); no job was started"
    )
    states = entered(events)
    assert states[states.index("StagedTask0") :][:3] == ["StagedTask0", "TaskNotStaged0", "Notify"]
    assert _jobs(aws) == before


def test_a_staged_task_runs_the_benchmark_between_training_and_the_registry(aws, staging):
    machine, names = staging
    with job_outcomes({}):
        execution, events = _start(aws, machine, names["bucket"], "benchmarked")
    assert execution["status"] == "SUCCEEDED", (execution.get("cause"), entered(events))
    states = entered(events)
    assert states[states.index("Train") :][:10] == [
        "Train", "TrainCompleted", "Benchmark", "BenchmarkCompleted", "HasBenchmarkMetrics", "BenchmarkMetricNames",
        "HasBenchmarkScore", "BenchmarkScore", "WithinBenchmarkDrop", "BenchmarkWithin",
    ]  # fmt: skip
    [job] = [n for n in _jobs(aws) if "-b-" in n]
    sent = aws["sagemaker"].describe_training_job(TrainingJobName=job)
    assert sent["HyperParameters"]["base"] == CONFIGS["staging"].training.hyperparameters["model_id"]
    package = aws["sagemaker"].describe_model_package(
        ModelPackageName=json.loads(execution["output"])["model_package_arn"]
    )
    assert package["ModelApprovalStatus"] == "PendingManualApproval"
    metadata = package["CustomerMetadataProperties"]
    assert metadata[CONTRACT.MAX_DROP] == "1.25"  # tests/stacks/job_outcomes.py: BENCHMARKED
    assert metadata["quality_gate_max_benchmark_drop"] == "2"  # config/staging.yaml
    assert metadata["benchmark_scores"] == (
        f"{sent['OutputDataConfig']['S3OutputPath']}{job}/output/model/{CONTRACT.SCORES_FILE}"
    )


def _gate_machine(template: dict) -> dict:
    """Staging's definition from the benchmark verdict on: RecordModel ends it (the gate passed), Notify fails it."""
    text = json.dumps(definition(template))
    for token in BUCKET_TOKENS:
        text = text.replace(token, BUCKET)
    text = re.sub(r"<map:[A-Za-z]+Uri>", IMAGE, text)
    asl = json.loads(re.sub(r"<[a-z]+:[^>]*>", "x", text))
    asl["StartAt"] = "HasBenchmarkMetrics"
    asl["States"]["RecordModel"] = {"Type": "Succeed"}
    asl["States"]["Notify"] = {"Type": "Fail", "Error": "Notified"}
    return asl


@pytest.fixture(scope="module")
def gate(aws, templates) -> str:
    asl = _gate_machine(templates["staging"]["Training"])
    [group] = {s["Parameters"]["ModelPackageGroupName"] for s in asl["States"].values() if "createModelPackage" in
               s.get("Resource", "")}  # fmt: skip
    aws["s3"].create_bucket(Bucket=BUCKET)
    aws["s3"].put_bucket_versioning(Bucket=BUCKET, VersioningConfiguration={"Status": "Enabled"})
    for key in SHARDS:
        aws["s3"].put_object(Bucket=BUCKET, Key=key, Body=b'{"text": "a row"}\n')
    aws["sagemaker"].create_model_package_group(ModelPackageGroupName=group)
    return aws["stepfunctions"].create_state_machine(
        name="benchmark-gate", definition=json.dumps(asl), roleArn="arn:aws:iam::123456789012:role/workflow"
    )["stateMachineArn"]


def _gated(aws, machine: str, case: str, drop: float | None, improvement: float = 2.1) -> tuple[dict, list, dict]:
    """A trained job (its loss gate figure) and its benchmark job (`drop` logged, or no metric), then the gate."""
    name, benchmark = f"llm-inf2-staging-{case}-0-0", f"llm-inf2-staging-{case}-b-0"
    _training_job(aws, name, {"eval_loss_improvement": improvement})
    aws["s3"].put_object(Bucket=BUCKET, Key=f"models/{name}/output/model/model_facts.json", Body=model_facts_body("q"))
    _training_job(aws, benchmark, {CONTRACT.MAX_DROP: drop} if drop is not None else {})
    described = json.loads(json.dumps(aws["sagemaker"].describe_training_job(TrainingJobName=benchmark), default=str))
    scores = f"s3://{BUCKET}/models/{name}/benchmark/{benchmark}/output/model/{CONTRACT.SCORES_FILE}"
    state = {
        "train_data": f"s3://{BUCKET}/datasets/guanaco/",
        "run": {"name": name, "hyperparameters": {"model_id": "q"}},
        "training": {"job_name": name, "model_s3_uri": f"s3://{BUCKET}/models/{name}/output/model/"},
        "benchmark": {"job_name": benchmark, "job": described, "scores": scores},
    }
    execution, events = run_execution(aws, machine, state, case)
    arn = next(
        json.loads(e["taskSucceededEventDetails"]["output"])["ModelPackageArn"]
        for e in events
        if e["type"] == "TaskSucceeded" and e["taskSucceededEventDetails"]["resource"] == "createModelPackage"
    )
    return execution, events, aws["sagemaker"].describe_model_package(ModelPackageName=arn)


def _cause(events: list[dict], state: str) -> str:
    [exited] = [e for e in events if e.get("stateExitedEventDetails", {}).get("name") == state]
    return json.loads(exited["stateExitedEventDetails"]["output"])["error"]["Cause"]


def test_the_gate_registers_rejected_a_version_that_lost_more_benchmark_points_than_allowed(aws, gate):
    execution, events, package = _gated(aws, gate, "lost", 6.25)
    assert execution["status"] == "FAILED"
    assert package["ModelApprovalStatus"] == "Rejected"
    metadata = package["CustomerMetadataProperties"]
    assert (metadata[CONTRACT.MAX_DROP], metadata["quality_gate_max_benchmark_drop"]) == ("6.25", "2")
    assert metadata["eval_loss_improvement"] == "2.1"  # the loss gate passed it: the benchmark rejected it
    assert _cause(events, "BenchmarkModelRejected") == (
        f"model package {package['ModelPackageArn']} (training job llm-inf2-staging-lost-0-0) is registered Rejected "
        f"by the quality gate: {CONTRACT.MAX_DROP} 6.25, maximum 2 (scores: s3://{BUCKET}/models/"
        f"llm-inf2-staging-lost-0-0/benchmark/llm-inf2-staging-lost-b-0/output/model/{CONTRACT.SCORES_FILE}); "
        "nothing is recorded for serving"
    )


def test_the_gate_accepts_a_version_within_the_benchmark_bound(aws, gate):
    execution, events, package = _gated(aws, gate, "kept", 1.5)
    assert execution["status"] == "SUCCEEDED", entered(events)
    assert package["ModelApprovalStatus"] == "PendingManualApproval"
    assert package["CustomerMetadataProperties"][CONTRACT.MAX_DROP] == "1.5"


def test_a_benchmark_without_a_score_is_rejected(aws, gate):
    execution, events, package = _gated(aws, gate, "noscore", None)
    assert "BenchmarkNoScore" in entered(events) and execution["status"] == "FAILED"
    assert package["ModelApprovalStatus"] == "Rejected"
    assert package["CustomerMetadataProperties"][CONTRACT.MAX_DROP] == "none"


def test_a_version_the_loss_gate_rejected_stays_rejected_for_its_loss(aws, gate):
    execution, events, package = _gated(aws, gate, "noloss", 0.5, improvement=0.0)
    assert package["ModelApprovalStatus"] == "Rejected"
    assert "ModelRejected" in entered(events) and "BenchmarkModelRejected" not in entered(events)
