"""The deployed Training workflow executed on the emulator: every path runs the real state machine, its
SageMaker jobs run as local processes (train.py on a tiny Llama), and the failure paths come from drills.

The local environment (config/local.yaml) is deployed with train.py's steps cut to 2, so one job takes
seconds of training plus imports and the merge.
"""

from __future__ import annotations

import dataclasses
import json
import sys
import time

import pytest

from local.emulator import LocalAws
from local.emulator import workflow_run as run
from local.emulator.faults import Drill, FaultPlan
from stacks.training.registry import FACT_TYPES
from tests.local.emulator.tiny_training import FAST, ROWS, recorded_base
from tests.synth import ROOT, replaced, synth

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("training-workflow")]
FAKE_TOKEN = "hf_" + "Wv5" * 12  # the shape of a hub token; no hub would take it
SHARDED_KEYS = [f"datasets/sharded/{n}" for n in ("_READY", *(f"train-{i}.jsonl" for i in range(3)))]


@pytest.fixture(scope="module")
def deployed(tmp_path_factory):
    from stacks.config import load_config

    sys.path.insert(0, str(ROOT / "training_code" / "qlora"))
    config = load_config("local", ROOT / "config")
    base = recorded_base(tmp_path_factory.mktemp("base"))
    with LocalAws.start(time_scale=0.001, work_root=tmp_path_factory.mktemp("jobs")) as aws:
        # Every run reads a hub token as a gated base would: the secret exists before the synth names its ARN.
        secret = aws.client("secretsmanager").create_secret(Name="llm-inf2/hub-token", SecretString=FAKE_TOKEN)
        # No benchmark job here: each run would add one (tests/stacks/training/test_benchmark_step.py runs the
        # step on moto, tests/training_code/qlora/test_benchmark_job.py the job through the toolkit).
        training = dataclasses.replace(
            config.training,
            hyperparameters={**config.training.hyperparameters, **FAST},
            hub_token_secret=secret["ARN"],
            benchmark=dataclasses.replace(config.training.benchmark, tasks=[]),
            quality_gate=dataclasses.replace(config.training.quality_gate, max_benchmark_drop=None),
        )
        assembly = synth(replaced(config, training=training), tmp_path_factory.mktemp("cdk-local"))
        # One thread per job: torch's default of one per core oversubscribes the two cores `make test` shares
        # between its workers, and the tiny model's ops are too small to gain from more.
        aws.job_runner.extra_env["OMP_NUM_THREADS"] = "1"
        aws.bootstrap()
        outputs = aws.deploy(assembly.directory, [config.stack_id("Training")])
        bucket = outputs[config.stack_id("Data")]["ArtifactBucketName"]
        s3 = aws.client("s3")
        for path in base.iterdir():
            s3.upload_file(str(path), bucket, config.training.base_model_key + path.name)
        sqs = aws.client("sqs")
        queue = sqs.create_queue(QueueName="failures")["QueueUrl"]
        queue_arn = sqs.get_queue_attributes(QueueUrl=queue, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
        topic = outputs[config.stack_id("Training")]["FailureTopicArn"]
        aws.client("sns").subscribe(TopicArn=topic, Protocol="sqs", Endpoint=queue_arn)
        yield {
            "aws": aws,
            "bucket": bucket,
            "queue": queue,
            "config": replaced(config, training=training),
            "training": outputs[config.stack_id("Training")],
            "assembly": assembly,
            "base": base,
            "secret": secret["ARN"],
        }


@pytest.fixture
def drills(deployed):
    runner = deployed["aws"].job_runner
    yield runner.faults.drills
    runner.faults = FaultPlan()


def start(
    deployed,
    *,
    name: str,
    hyperparameters: dict | None = None,
    dataset: str = "datasets/items/",
    timeout_s: float = 300,
) -> dict:
    """Start an execution by hand (the tool's input shape) and follow it to its end."""
    aws = deployed["aws"]
    _upload_dataset(deployed, dataset, marker=False)
    body = {"train_data": f"s3://{deployed['bucket']}/{dataset}", "hyperparameters": hyperparameters or {}}
    arn = aws.client("stepfunctions").start_execution(
        stateMachineArn=deployed["training"]["StateMachineArn"], name=name, input=json.dumps(body)
    )["executionArn"]
    return run.follow(aws, arn, say=lambda line: None, timeout_s=timeout_s)


def _upload_dataset(deployed, prefix: str, *, marker: bool, shards: int = 3) -> None:
    s3 = deployed["aws"].client("s3")
    for i in range(shards):
        s3.put_object(
            Bucket=deployed["bucket"], Key=f"{prefix}train-{i}.jsonl", Body=("\n".join(ROWS[i::shards]) + "\n").encode()
        )
    if marker:
        s3.put_object(Bucket=deployed["bucket"], Key=f"{prefix}_READY", Body=b"")


def notifications(deployed, *, wait_s: int = 1) -> list[dict]:
    """The failure topic's messages since the last call (received and deleted); `wait_s=0` only drains."""
    sqs = deployed["aws"].client("sqs")
    messages = sqs.receive_message(QueueUrl=deployed["queue"], MaxNumberOfMessages=10, WaitTimeSeconds=wait_s).get(
        "Messages", []
    )
    for m in messages:
        sqs.delete_message(QueueUrl=deployed["queue"], ReceiptHandle=m["ReceiptHandle"])
    return [json.loads(json.loads(m["Body"])["Message"]) for m in messages]


def requests_of(deployed, execution_name_hash: str) -> list[dict]:
    return [r for r in deployed["aws"].job_runner.requests if execution_name_hash in r["TrainingJobName"]]


def machine_of(deployed) -> str:
    return deployed["training"]["StateMachineArn"]


def run_name(described: dict) -> str:
    return json.loads(described.get("output") or "{}").get("job_name", "")


@pytest.fixture(scope="module")
def sharded(deployed):
    """The run that three shards and their marker start through S3 events: the normal run, which the gate's test
    reads as its passing arm, also taken down both retry paths (one job less than a run each): its first
    CreateTrainingJob is throttled (the Train state's API retry), then the job that call created hits
    CapacityError (the capacity loop: a wait, then a new job under a new name with the same checkpoints). Neither
    fault changes what the run records."""
    aws, machine = deployed["aws"], deployed["training"]["StateMachineArn"]
    before = {e["executionArn"] for e in run.executions(aws, machine)}
    aws.job_runner.faults = FaultPlan([Drill("throttle", tries=(1,)), Drill("capacity", tries=(1,))])
    waits_before = len(aws.clock.waits)
    try:
        _upload_dataset(deployed, "datasets/sharded/", marker=True)
        time.sleep(1)
        started = [e for e in run.executions(aws, machine) if e["executionArn"] not in before]
        described = run.follow(aws, started[0]["executionArn"], say=lambda line: None, timeout_s=600) if started else {}
    finally:
        aws.job_runner.faults = FaultPlan()
    return {"started": started, "described": described, "waits": aws.clock.waits[waits_before:]}


def test_three_shards_and_the_marker_start_one_execution_that_records_the_model(deployed, sharded):
    aws = deployed["aws"]
    assert len(sharded["started"]) == 1, "three shards and one marker must start exactly one run"
    described = sharded["described"]
    assert described["status"] == "SUCCEEDED", described.get("cause")
    output = json.loads(described["output"])
    assert output["approval"]["status"] == "PendingManualApproval"  # passed the gate, so it is recorded
    assert output["train_data"] == f"s3://{deployed['bucket']}/datasets/sharded/"
    job = [r for r in aws.job_runner.requests if r["TrainingJobName"] == output["job_name"]][0]
    assert job["InputDataConfig"][0]["DataSource"]["S3DataSource"]["S3Uri"] == output["train_data"]
    keys = {
        o["Key"]
        for o in aws.client("s3").list_objects_v2(
            Bucket=deployed["bucket"], Prefix=f"models/{output['job_name']}/output/model/"
        )["Contents"]
    }
    assert {f"models/{output['job_name']}/output/model/{f}" for f in ("config.json", "model.safetensors")} <= keys
    recorded = aws.client("ssm").get_parameter(Name=output["model_parameter"])["Parameter"]["Value"]
    assert recorded == output["model_s3_uri"] == f"s3://{deployed['bucket']}/models/{output['job_name']}/output/model/"
    described_job = aws.client("sagemaker").describe_training_job(TrainingJobName=output["job_name"])
    assert described_job["TrainingJobStatus"] == "Completed"
    assert {m["MetricName"] for m in described_job["FinalMetricDataList"]} >= {"train_loss"}
    package = _check_registered(deployed, output["model_package_arn"], output["model_s3_uri"], SHARDED_KEYS)
    marker = aws.client("s3").head_object(Bucket=deployed["bucket"], Key="datasets/sharded/_READY")
    assert package["CustomerMetadataProperties"]["dataset_marker_version_id"] == marker["VersionId"]
    assert package["CustomerMetadataProperties"]["dataset_prefix"] == "datasets/sharded/"


def test_the_registered_facts_are_the_merged_model_as_transformers_loads_it(deployed, sharded, tmp_path):
    """The package metadata of the normal run against the merged folder it points at, loaded by transformers."""
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    from local.emulator.s3_folders import download_prefix

    output = json.loads(sharded["described"]["output"])
    aws = deployed["aws"]
    metadata = aws.client("sagemaker").describe_model_package(ModelPackageName=output["model_package_arn"])[
        "CustomerMetadataProperties"
    ]
    download_prefix(aws.client("s3"), output["model_s3_uri"], tmp_path)
    config = AutoConfig.from_pretrained(tmp_path)
    model = AutoModelForCausalLM.from_pretrained(tmp_path, dtype="auto")
    # config/local.yaml: the base is the `model` channel, /opt/ml/input/data/model in SageMaker (the job's own
    # folder here, as the toolkit's SAGEMAKER_BASE_DIR puts it)
    assert metadata["base_model"].endswith("/input/data/model")
    assert {k: metadata[k] for k in FACT_TYPES} == {
        "base_model": metadata["base_model"],
        "model_type": config.model_type,
        "architecture": type(model).__name__,
        "parameters": str(sum(p.numel() for p in model.parameters())),
        "size_bytes": str(sum(p.stat().st_size for p in tmp_path.glob("*.safetensors"))),
        "dtype": str(next(model.parameters()).dtype).removeprefix("torch."),
        "context_length": str(config.max_position_embeddings),
        "num_attention_heads": str(config.num_attention_heads),
        "num_key_value_heads": str(config.num_key_value_heads),
        "chat_template": "true" if AutoTokenizer.from_pretrained(tmp_path).chat_template else "false",
    }
    base_key = deployed["config"].training.base_model_key
    assert metadata["base_model_source"] == f"s3://{deployed['bucket']}/{base_key}"


def test_the_job_reads_the_hub_token_and_writes_it_nowhere(deployed, sharded, tmp_path):
    """training.hub_token_secret set: the job was given the secret's ARN and read it at start-up (its log names
    the ARN, not the token); the token is in no template, job request, job log, nor any file of the job's
    output (training_report.json) or model folder (the model card among them)."""
    import io
    import tarfile
    from pathlib import Path

    from local.emulator.s3_folders import download_prefix

    aws, arn = deployed["aws"], deployed["secret"]
    output = json.loads(sharded["described"]["output"])
    (request,) = [r for r in aws.job_runner.requests if r["TrainingJobName"] == output["job_name"]]
    assert request["Environment"]["HF_TOKEN_SECRET_ARN"] == arn
    log = (aws.job_runner.work_root / output["job_name"] / "job.log").read_text()
    assert f"hub token: read from secret {arn} into HF_TOKEN" in log
    download_prefix(aws.client("s3"), output["model_s3_uri"], tmp_path)
    assert (tmp_path / "README.md").is_file()  # the model card
    bucket, key = output["model_s3_uri"].replace("/output/model/", "/output/output.tar.gz")[5:].split("/", 1)
    packed = aws.client("s3").get_object(Bucket=bucket, Key=key)["Body"].read()
    with tarfile.open(fileobj=io.BytesIO(packed)) as archive:
        outputs = {m.name: archive.extractfile(m).read().decode(errors="replace") for m in archive if m.isfile()}
    assert "training_report.json" in outputs
    templates = sorted(Path(deployed["assembly"].directory).glob("*.template.json"))
    written = {
        **{p.name: p.read_text() for p in templates},
        "requests": json.dumps(aws.job_runner.requests),
        "job.log": log,
        **{f"output/{name}": text for name, text in outputs.items()},
        **{f"model/{p.name}": p.read_text(errors="replace") for p in tmp_path.iterdir()},
    }
    assert any(arn in written[p.name] for p in templates)  # the role's grant names the ARN; the token is nowhere
    assert [name for name, text in written.items() if FAKE_TOKEN in text] == []


def test_the_job_checks_its_base_against_the_record_before_training(deployed, sharded):
    """The local environment's record (config/models/tiny-pretrained.yaml) reaches the job in its Environment and
    the `model` channel's base is checked against it, every fact, before the first training step."""
    aws = deployed["aws"]
    output = json.loads(sharded["described"]["output"])
    (request,) = [r for r in aws.job_runner.requests if r["TrainingJobName"] == output["job_name"]]
    given = json.loads(request["Environment"]["BASE_MODEL_RECORD"])
    assert given["record"] == "config/models/tiny-pretrained.yaml" and "hub_id" not in given  # a copy: no hub id
    log = (aws.job_runner.work_root / output["job_name"] / "job.log").read_text()
    facts = ", ".join(sorted(set(given) - {"record"}))
    (line,) = [line for line in log.splitlines() if line.startswith("base model ")]
    assert line.endswith(f"/input/data/model: {facts} as config/models/tiny-pretrained.yaml records them"), line
    assert log.index(line) < log.index("train_loss=")


def _check_registered(deployed, package_arn: str, model_s3_uri: str, dataset_keys: list[str]) -> dict:
    """The run's package version in the Data stack's group: the merged prefix, its evaluation report, a lineage
    manifest naming the dataset's current object versions."""
    aws, config = deployed["aws"], deployed["config"]
    group = aws.outputs(config.stack_id("Data"))["ModelPackageGroupName"]
    package = aws.client("sagemaker").describe_model_package(ModelPackageName=package_arn)
    assert package["ModelPackageGroupName"] == group
    source = package["InferenceSpecification"]["Containers"][0]["ModelDataSource"]["S3DataSource"]
    assert source == {"S3Uri": model_s3_uri, "S3DataType": "S3Prefix", "CompressionType": "None"}
    metrics = package["ModelMetrics"]["ModelQuality"]["Statistics"]["S3Uri"]
    bucket, key = metrics.removeprefix("s3://").split("/", 1)
    assert metrics == f"{model_s3_uri}evaluation.json" and aws.client("s3").head_object(Bucket=bucket, Key=key)
    metadata = package["CustomerMetadataProperties"]
    bucket, key = metadata["lineage"].removeprefix("s3://").split("/", 1)
    s3 = aws.client("s3")
    body = s3.get_object(Bucket=bucket, Key=key, VersionId=metadata["lineage_version_id"])["Body"]
    manifest = json.loads(body.read())
    listed = {o["Key"]: o["VersionId"] for o in manifest["dataset_objects"]}
    assert sorted(listed) == sorted(dataset_keys)
    for object_key, version in listed.items():
        assert s3.head_object(Bucket=bucket, Key=object_key)["VersionId"] == version
    return package


def _logs_gate_metric() -> bool:
    """train.py's MetricDefinitions carry the gate's metric (every run is evaluated)."""
    from stacks.code_contract.qlora import metric_definitions
    from stacks.training.registry import GATE_METRIC

    return GATE_METRIC in {d["Name"] for d in metric_definitions()}


def _parameter(deployed) -> dict:
    """The SSM model parameter as it is now: its value and version."""
    name = deployed["training"]["ModelParameterName"]
    found = deployed["aws"].client("ssm").get_parameter(Name=name)["Parameter"]
    return {"value": found["Value"], "version": found["Version"]}


def _assert_rejected_and_reported(deployed, described: dict, minimum: str) -> dict:
    """A rejected run: registered Rejected with its metrics, ended ModelRejected, reported on the failure topic
    with the version, its improvement and the minimum; returns the package."""
    aws = deployed["aws"]
    assert described["status"] == "FAILED" and described["error"] == "ModelRejected", described.get("cause")
    states = run.states_entered(aws, described["executionArn"])
    assert states[-6:] == ["RegisterModel", "GatePassed", "ModelRejected", "Notify", "ErrorName", "Failed"]
    assert "RecordModel" not in states
    arn = run.task_result(aws, described["executionArn"], "RegisterModel")["ModelPackageArn"]
    package = aws.client("sagemaker").describe_model_package(ModelPackageName=arn)
    metadata = package["CustomerMetadataProperties"]
    assert package["ModelApprovalStatus"] == "Rejected" and metadata["quality_gate_min_improvement"] == minimum
    assert float(metadata["eval_loss_improvement"]) < float(minimum)
    [message] = notifications(deployed)
    assert message["error"]["Error"] == "ModelRejected" and message["error"]["Cause"] == described["cause"]
    for fragment in (arn, f"eval_loss_improvement {metadata['eval_loss_improvement']}", f"minimum {minimum}"):
        assert fragment in described["cause"], (fragment, described["cause"])
    return package


@pytest.mark.skipif(not _logs_gate_metric(), reason="train.py does not log eval_loss_improvement yet")
def test_the_gate_rejects_a_run_with_learning_rate_0_and_records_nothing(deployed, sharded):
    """The normal run passed (and is the recorded model); a run that learned nothing is registered Rejected,
    fails, and leaves the model parameter as it was."""
    assert sharded["described"]["status"] == "SUCCEEDED"
    before = _parameter(deployed)
    notifications(deployed, wait_s=0)
    described = start(deployed, name="gate-lr0", hyperparameters={"learning_rate": "0"}, dataset="datasets/gate/")
    package = _assert_rejected_and_reported(deployed, described, "0.01")
    assert package["CustomerMetadataProperties"]["eval_loss_improvement"] == "0.0"
    assert package["CustomerMetadataProperties"]["dataset_marker_version_id"] == "absent"  # started by hand
    job = run.task_result(deployed["aws"], described["executionArn"], "DescribeRun")["TrainingJobName"]
    _check_registered(
        deployed,
        package["ModelPackageArn"],
        f"s3://{deployed['bucket']}/models/{job}/output/model/",
        [f"datasets/gate/train-{i}.jsonl" for i in range(3)],
    )
    assert _parameter(deployed) == before


@pytest.mark.parametrize(
    ("hyperparameters", "cause"),
    [
        ({"lora_r": 16}, "string"),
        ({"no_such_flag": "1"}, "train.py"),
    ],
)
def test_a_bad_input_notifies_and_fails_without_starting_a_job(deployed, hyperparameters, cause):
    jobs_before = len(deployed["aws"].job_runner.requests)
    notifications(deployed, wait_s=0)
    described = start(deployed, name=f"bad-{sorted(hyperparameters)[0]}", hyperparameters=hyperparameters)
    assert described["status"] == "FAILED" and "InvalidInput" in described["error"]
    assert cause in described["cause"]
    states = run.states_entered(deployed["aws"], described["executionArn"])
    assert states[0] == "ValidateInput" and states[-3:] == ["Notify", "ErrorName", "Failed"]
    assert not any(s.startswith("Train") for s in states)
    assert len(deployed["aws"].job_runner.requests) == jobs_before
    [message] = notifications(deployed)
    assert message["error"]["Error"] == described["error"]


@pytest.fixture(scope="module")
def retried(deployed, sharded):
    """The sharded run's retries: its description, the clock's waits during it and its history."""
    described = sharded["described"]
    history = (
        deployed["aws"]
        .client("stepfunctions")
        .get_execution_history(executionArn=described["executionArn"], maxResults=1000)["events"]
    )
    return {"described": described, "waits": sharded["waits"], "history": history}


def test_a_capacity_error_waits_and_retries_under_a_new_name_with_the_same_checkpoints(deployed, retried):
    described = retried["described"]
    assert described["status"] == "SUCCEEDED", described.get("cause")
    name = run_name(described)
    run_id = name.rsplit("-", 2)[0]
    tries = requests_of(deployed, run_id)
    assert [r["TrainingJobName"] for r in tries] == [f"{run_id}-0-1", f"{run_id}-1-0"] and name == f"{run_id}-1-0"
    assert tries[0]["CheckpointConfig"]["S3Uri"] == tries[1]["CheckpointConfig"]["S3Uri"]
    assert tries[0]["CheckpointConfig"]["S3Uri"].endswith(f"/checkpoints/{run_id}/")
    backoff = deployed["config"].training.capacity_backoff_seconds
    assert ("wait", backoff) in retried["waits"]


def test_any_other_job_failure_notifies_and_fails(deployed, drills):
    drills.append(Drill("algorithm_error", tries=(1,)))
    notifications(deployed, wait_s=0)
    described = start(deployed, name="algorithm-error")
    assert described["status"] == "FAILED" and described["error"] == "StepFailed", described.get("cause")
    assert described["cause"].startswith("States.TaskFailed: ") and "AlgorithmError" in described["cause"]
    states = run.states_entered(deployed["aws"], described["executionArn"])
    assert states.count("Train") == 1 and states[-4:] == ["CapacityRetry", "Notify", "ErrorName", "StepFailed"]
    assert len(notifications(deployed)) == 1


def test_a_throttled_create_training_job_is_retried(deployed, retried):
    described = retried["described"]
    assert described["status"] == "SUCCEEDED", described.get("cause")
    run_id = run_name(described).rsplit("-", 2)[0]
    assert requests_of(deployed, run_id)[0]["TrainingJobName"].endswith("-0-1")  # attempt 0, the first API retry
    # ThrottlingException is no error class of SageMaker's model: Step Functions raises the service's base one.
    failed = [e["taskFailedEventDetails"]["error"] for e in retried["history"] if e["type"] == "TaskFailed"]
    assert failed == ["SageMaker.AmazonSageMakerException", "States.TaskFailed"]  # then the CapacityError job
    assert [kind for kind, _ in retried["waits"]] == ["retry", "wait"], retried["waits"]  # the API retry, then the
    # capacity loop's wait


def test_the_capacity_retry_loop_ends(deployed, drills):
    """Every try hits CapacityError: capacity_retries new jobs after the first, doubling waits, then Failed.
    With the attempt counter constant the loop would never end, and this execution would time out."""
    drills.append(Drill("capacity", tries=tuple(range(1, 20))))
    retries = deployed["config"].training.capacity_retries
    waits_before = len(deployed["aws"].clock.waits)
    described = start(deployed, name="no-capacity", timeout_s=60)
    assert described["status"] == "FAILED" and "CapacityError" in described["cause"]
    states = run.states_entered(deployed["aws"], described["executionArn"])
    assert states.count("Train") == retries + 1 and states[-3:] == ["Notify", "ErrorName", "StepFailed"]
    backoff = deployed["config"].training.capacity_backoff_seconds
    assert deployed["aws"].clock.waits[waits_before:] == [("wait", backoff * 2**i) for i in range(retries)]


def test_a_job_past_max_runtime_is_stopped_and_not_recorded(deployed, drills):
    """MaxRuntimeInSeconds runs out (the max_runtime drill counts it in seconds): SageMaker ends the job Stopped
    / MaxRuntimeExceeded with a model folder; `.sync` returns that description and TrainCompleted sends it to
    Notify, so the execution fails and the model parameter keeps its value."""
    aws = deployed["aws"]
    drills.append(Drill("max_runtime", tries=(1,)))
    ssm = aws.client("ssm")
    parameter = deployed["training"]["ModelParameterName"]
    before = ssm.get_parameter(Name=parameter)["Parameter"]["Value"]
    notifications(deployed, wait_s=0)
    described = start(deployed, name="max-runtime")
    history = aws.client("stepfunctions").get_execution_history(
        executionArn=described["executionArn"], maxResults=1000
    )["events"]
    for event in history:  # printed for the record (pytest -s)
        details = {k: v for k, v in event.items() if k.endswith("EventDetails")}
        name = next((d["name"] for d in details.values() if "name" in d), "")
        job = next((d.get("output", "") for d in details.values() if "TrainingJobStatus" in d.get("output", "")), "")
        status = json.loads(job) if job else {}
        print(
            event["id"],
            event["type"],
            name,
            status.get("TrainingJobStatus", ""),
            status.get("SecondaryStatus", ""),
            (event.get("executionFailedEventDetails") or {}).get("cause", ""),
        )
    assert described["status"] == "FAILED", described.get("output")
    states = run.states_entered(aws, described["executionArn"])
    assert "RecordModel" not in states
    assert states[states.index("Train") :] == [
        "Train",
        "TrainCompleted",
        "TrainNotCompleted",
        "Notify",
        "ErrorName",
        "Failed",
    ]
    assert described["error"] == "JobNotCompleted"
    task = next(
        json.loads(e["taskSucceededEventDetails"]["output"])
        for e in history
        if e["type"] == "TaskSucceeded" and "TrainingJobStatus" in e["taskSucceededEventDetails"]["output"]
    )
    assert (task["TrainingJobStatus"], task["SecondaryStatus"]) == ("Stopped", "MaxRuntimeExceeded")
    job = aws.client("sagemaker").describe_training_job(TrainingJobName=task["TrainingJobName"])
    assert job["SecondaryStatusTransitions"][-1]["Status"] == "MaxRuntimeExceeded"
    assert "MaxRuntimeExceeded" in described["cause"] and "Stopped" in described["cause"]
    assert ssm.get_parameter(Name=parameter)["Parameter"]["Value"] == before
    assert len(notifications(deployed)) == 1


@pytest.mark.skipif(not _logs_gate_metric(), reason="train.py does not log eval_loss_improvement yet")
def test_a_gate_minimum_above_the_gain_rejects_the_run_and_the_pipeline_serves_nothing(deployed, sharded, tmp_path):
    """The measurement that found the gate after RecordModel: config/local.yaml's minimum raised to 9.5, above any
    gain of this run, and `make pipeline`'s training path (local/pipeline.py) on the redeployed stack. The package
    is registered Rejected, the model parameter keeps its value and version, the failure topic says why, and the
    pipeline exits with one line, before downloading or serving anything."""
    from local import pipeline

    assert sharded["described"]["status"] == "SUCCEEDED"
    aws, config = deployed["aws"], deployed["config"]
    gate = dataclasses.replace(config.training.quality_gate, min_improvement=9.5)
    raised = replaced(config, training=dataclasses.replace(config.training, quality_gate=gate))
    aws.deploy(synth(raised, tmp_path / "cdk-raised").directory, [config.stack_id("Training")])
    before = _parameter(deployed)
    notifications(deployed, wait_s=0)
    data = tmp_path / "instructions.jsonl"
    data.write_text("\n".join(ROWS) + "\n")
    lines: list[str] = []
    outputs = pipeline.stack_outputs(aws, config)
    try:
        with pytest.raises(SystemExit) as refused:
            pipeline.run_training(
                aws, outputs, config, tmp_path / "work", lines.append, data=data, base=deployed["base"]
            )
    finally:
        aws.deploy(deployed["assembly"].directory, [config.stack_id("Training")])  # the module's gate again
    line = str(refused.value.code)
    sfn = aws.client("stepfunctions")
    runs = [sfn.describe_execution(executionArn=e["executionArn"]) for e in run.executions(aws, machine_of(deployed))]
    [described] = [d for d in runs if json.loads(d["input"])["train_data"].endswith("/datasets/instructions/_READY")]
    package = _assert_rejected_and_reported(deployed, described, "9.5")
    metadata = package["CustomerMetadataProperties"]
    assert float(metadata["eval_loss_improvement"]) > 0  # it learned; the bar was raised above it
    marker = aws.client("s3").head_object(Bucket=deployed["bucket"], Key="datasets/instructions/_READY")
    assert metadata["dataset_marker_version_id"] == marker["VersionId"]
    assert line == (
        f"pipeline: not serving {package['ModelPackageArn']}: registered Rejected by the quality gate "
        f"(eval_loss_improvement {metadata['eval_loss_improvement']}, minimum 9.5); the model parameter was not "
        "written"
    )
    after = _parameter(deployed)
    print(f"{line}\nSSM before {before}, after {after}; package {package['ModelPackageArn']}: {metadata}")  # pytest -s
    assert after == before
    assert not (tmp_path / "work" / "model").exists() and not any("downloaded" in x for x in lines)
