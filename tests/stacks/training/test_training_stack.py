"""The Training stack's state machine, trigger, IAM and outputs, on the session's synthesized templates."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from stacks.code_contract.qlora import RESERVED, hyperparameter_names, metric_definitions
from stacks.config import load_config
from tests.synth import ROOT

ENVS = ("dev", "prod")
CONFIGS = {env: load_config(env, ROOT / "config") for env in ENVS}
PSEUDO = {
    "AWS::Partition": "aws",
    "AWS::Region": "us-east-1",
    "AWS::AccountId": "123456789012",
    "AWS::URLSuffix": "amazonaws.com",
}
# prod (isolated) pulls its own image, with the requirements baked in, from the deploying account's ECR.
IMAGES = {
    "dev": "<map:HfPytorchTrainingGpuUri>",
    "prod": "123456789012.dkr.ecr.us-east-1.amazonaws.com/llm-inf2-training:qlora-2026-12",
}


def _render(piece) -> str:
    """Tokens in the definition become readable placeholders: <import:...>, <ref:...>, <map:...>."""
    if isinstance(piece, str):
        return piece
    if "Ref" in piece:
        return PSEUDO.get(piece["Ref"], f"<ref:{piece['Ref']}>")
    if "Fn::ImportValue" in piece:
        return f"<import:{piece['Fn::ImportValue'].split(':', 1)[1]}>"
    if "Fn::Sub" in piece:
        text = piece["Fn::Sub"]
        for name, value in PSEUDO.items():
            text = text.replace(f"${{{name}}}", value)
        return text
    if "Fn::GetAtt" in piece:
        return f"<getatt:{'.'.join(piece['Fn::GetAtt'])}>"
    if "Fn::FindInMap" in piece:
        return f"<map:{piece['Fn::FindInMap'][2]}>"
    raise AssertionError(f"unexpected token {piece}")


def resources_of(template: dict, resource_type: str) -> dict[str, dict]:
    return {k: v for k, v in template["Resources"].items() if v["Type"] == resource_type}


def definition(template: dict) -> dict:
    (machine,) = resources_of(template, "AWS::StepFunctions::StateMachine").values()
    parts = machine["Properties"]["DefinitionString"]["Fn::Join"][1]
    return json.loads("".join(_render(p) for p in parts))


@pytest.fixture(scope="module")
def definitions(templates):
    return {env: definition(templates[env]["Training"]) for env in ENVS}


def _asl_safe(value):
    """asl-validator checks ARNs: give the placeholders a valid shape."""
    if isinstance(value, dict):
        return {k: _asl_safe(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_asl_safe(v) for v in value]
    if isinstance(value, str):
        return re.sub(r"<[a-z]+:[^>]*>", "x", value)
    return value


def test_definitions_pass_asl_validator(definitions, tmp_path):
    args = []
    for env in ENVS:
        path = tmp_path / f"{env}.asl.json"
        path.write_text(json.dumps(_asl_safe(definitions[env])))
        args += ["--json-path", str(path)]
    result = subprocess.run(
        ["npx", "--no-install", "asl-validator", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.count("is valid") == len(ENVS), result.stdout


@pytest.mark.parametrize("env", ENVS)
def test_train_state_is_the_raw_sync_integration(definitions, env):
    train = definitions[env]["States"]["Train"]
    assert train["Resource"] == "arn:aws:states:::sagemaker:createTrainingJob.sync"
    params = train["Parameters"]
    assert params["OutputDataConfig"] == {
        "S3OutputPath": "s3://<import:ExportsOutputRefArtifactBucket7410C9EF659B6D66>/models/",
        "KmsKeyId": "<import:ExportsOutputFnGetAttArtifactKey8D84C5F0Arn9D58E80E>",
        "CompressionType": "NONE",
    }
    assert params["ResourceConfig"]["VolumeKmsKeyId"] == params["OutputDataConfig"]["KmsKeyId"]
    assert params["RoleArn"] == "<getatt:TrainingRoleA2F7D4DF.Arn>"
    assert params["AlgorithmSpecification"]["TrainingImage"] == IMAGES[env]
    assert params["AlgorithmSpecification"]["MetricDefinitions"] == list(metric_definitions())
    assert params["HyperParameters.$"] == "$.run.hyperparameters"
    assert params["InputDataConfig"][0]["ChannelName"] == "training"
    assert params["InputDataConfig"][0]["DataSource"]["S3DataSource"]["S3Uri.$"] == "$.train_data"
    assert params["TrainingJobName.$"] == "States.Format('{}-{}-{}', $.run.name, $.run.attempt, $$.State.RetryCount)"
    assert train["ResultSelector"]["model_s3_uri.$"].startswith("States.Format('s3://<import:")


@pytest.mark.parametrize("env", ENVS)
def test_job_shape_comes_from_config(definitions, env):
    training = CONFIGS[env].training
    params = definitions[env]["States"]["Train"]["Parameters"]
    assert params["ResourceConfig"]["InstanceType"] == training.instance_type == "ml.g5.2xlarge"
    assert params["ResourceConfig"]["InstanceCount"] == training.instance_count == 1
    assert params["ResourceConfig"]["VolumeSizeInGB"] == training.volume_size_gb
    assert params["StoppingCondition"]["MaxRuntimeInSeconds"] == training.max_runtime_hours * 3600
    isolated = CONFIGS[env].network.isolated  # tests/stacks/network/test_network_isolation.py checks the VPC side
    assert params["EnableNetworkIsolation"] is (training.network_isolation or isolated)
    assert ("VpcConfig" in params) is isolated


def test_spot_in_dev_on_demand_in_prod(definitions):
    dev = definitions["dev"]["States"]["Train"]["Parameters"]
    assert dev["EnableManagedSpotTraining"] is True
    assert dev["StoppingCondition"]["MaxWaitTimeInSeconds"] == 24 * 3600
    assert dev["CheckpointConfig"]["S3Uri.$"] == (
        "States.Format('s3://<import:ExportsOutputRefArtifactBucket7410C9EF659B6D66>/checkpoints/{}/', $.run.name)"
    )
    prod = definitions["prod"]["States"]["Train"]["Parameters"]
    assert "EnableManagedSpotTraining" not in prod and "MaxWaitTimeInSeconds" not in prod["StoppingCondition"]


@pytest.mark.parametrize("env", ENVS)
def test_hyperparameters_merge_config_overrides_and_script_mode(definitions, env):
    states = definitions[env]["States"]
    defaults = states["Defaults"]["Result"]
    assert defaults["config"] == dict(CONFIGS[env].training.hyperparameters)
    fixed = defaults["fixed"]
    assert fixed["sagemaker_program"] == "train.py"
    assets = r"s3://cdk-hnb659fds-assets-123456789012-us-east-1/[0-9a-f]{64}\.gz"
    if CONFIGS[env].network.isolated:  # the same asset through the `code` channel (test_network_isolation.py)
        assets = r"/opt/ml/input/data/code/[0-9a-f]{64}\.gz"
    assert re.fullmatch(assets, fixed["sagemaker_submit_directory"])
    assert fixed["sagemaker_region"] == "us-east-1"
    merge = states["Prepare"]["Parameters"]["hyperparameters.$"]
    # overrides win over config, script-mode keys win over both
    assert merge == (
        "States.JsonMerge(States.JsonMerge($.defaults.config, $.hyperparameters, false), $.defaults.fixed, false)"
    )


def test_config_hyperparameters_are_flags_of_train_py():
    """train.py's own parser (what `train.py --help` prints) is the source of truth for the names."""
    result = subprocess.run(
        [sys.executable, str(ROOT / "training_code/qlora/train.py"), "--help"],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    flags = set(re.findall(r"--([a-z_]+)", result.stdout))
    for env in ENVS:
        assert set(CONFIGS[env].training.hyperparameters) <= flags


@pytest.mark.parametrize("env", ENVS)
def test_retry_with_backoff_on_throttling_and_capacity(definitions, env):
    states = definitions[env]["States"]
    (retry,) = states["Train"]["Retry"]
    expected = {"SageMaker.AmazonSageMakerException", "ThrottlingException", "SageMaker.ResourceLimitExceededException"}
    assert expected <= set(retry["ErrorEquals"])
    assert retry["BackoffRate"] == 2 and retry["MaxAttempts"] >= 2 and retry["JitterStrategy"] == "FULL"
    capacity = states["CapacityRetry"]
    (choice,) = capacity["Choices"]
    patterns = {c["StringMatches"] for c in choice["And"][1]["Or"]}
    assert "*CapacityError*" in patterns
    assert choice["And"][2] == {"Variable": "$.run.attempt", "NumericLessThan": CONFIGS[env].training.capacity_retries}
    assert choice["Next"] == "WaitForCapacity" and capacity["Default"] == "Notify"
    assert states["WaitForCapacity"] == {"Type": "Wait", "SecondsPath": "$.run.wait_seconds", "Next": "NextAttempt"}
    next_attempt = states["NextAttempt"]
    assert next_attempt["Next"] == "EvalData"  # which picks Train or TrainWithEval again
    assert next_attempt["Parameters"]["wait_seconds.$"] == "States.MathAdd($.run.wait_seconds, $.run.wait_seconds)"


def test_every_failure_notifies_then_fails(definitions):
    states = definitions["dev"]["States"]
    for name in ("Train", "TrainWithEval"):
        catches = {tuple(c["ErrorEquals"]): c["Next"] for c in states[name]["Catch"]}
        assert catches == {("States.TaskFailed",): "CapacityRetry", ("States.ALL",): "Notify"}
        assert states[name]["Retry"] == states["Train"]["Retry"] and states[name]["Next"] == "TrainCompleted"
    completed = states["TrainCompleted"]
    assert completed["Choices"] == [
        {"Variable": "$.training.status", "StringEquals": "Completed", "Next": "DescribeRun"}
    ]
    assert completed["Default"] == "TrainNotCompleted" and states["TrainNotCompleted"]["Next"] == "Notify"
    assert states["TrainNotCompleted"]["Parameters"]["Error"] == "JobNotCompleted"
    catch_all = {"ErrorEquals": ["States.ALL"], "ResultPath": "$.error", "Next": "Notify"}
    registry = ("DescribeRun", "ReadModelFacts", "ListDatasetVersions", "WriteLineage", "RegisterModel")
    for task in (*registry, "RecordModel"):
        assert states[task]["Catch"] == [catch_all], task
    assert states["GatePassed"]["Default"] == "ModelRejected" and states["ModelRejected"]["Next"] == "Notify"
    assert states["ModelRejected"]["Parameters"]["Error"] == "ModelRejected"
    assert states["ValidateInput"]["Default"] == "InvalidInput" and states["InvalidInput"]["Next"] == "Notify"
    for refusal in ("InvalidHyperparameterValue", "UnknownHyperparameter", "InvalidDatasetMarker"):
        assert states[refusal]["Next"] == "Notify" and states[refusal]["Parameters"]["Error"] == "InvalidInput"
    assert states["HyperparameterValues"]["Default"] == "InvalidHyperparameterValue"
    assert states["HyperparameterNames"]["Default"] == "UnknownHyperparameter"
    assert states["DatasetMarker"]["Choices"][1]["Next"] == "InvalidDatasetMarker"
    notify = states["Notify"]
    assert notify["Resource"] == "arn:aws:states:::sns:publish"
    assert notify["Parameters"]["TopicArn"].startswith("<ref:FailureTopic")
    name = states[notify["Next"]]
    assert name["Choices"] == [{"Variable": "$.error.Error", "StringMatches": "States.*", "Next": "StepFailed"}]
    assert states["StepFailed"] == {
        "Type": "Fail",
        "Error": "StepFailed",
        "CausePath": "States.Format('{}: {}', $.error.Error, $.error.Cause)",
    }
    assert states[name["Default"]] == {"Type": "Fail", "ErrorPath": "$.error.Error", "CausePath": "$.error.Cause"}


def test_success_records_the_model_prefix(definitions, templates):
    states = definitions["dev"]["States"]
    record = states["RecordModel"]
    assert record["Resource"] == "arn:aws:states:::aws-sdk:ssm:putParameter"
    assert record["Parameters"]["Name"].startswith("<ref:ModelParameter")
    names = {
        p["Properties"]["Name"] for p in resources_of(templates["dev"]["Training"], "AWS::SSM::Parameter").values()
    }
    assert names == {"/llm-inf2/dev/training/model-s3-uri", "/llm-inf2/dev/training/compiled-model-s3-uri"}
    assert record["Parameters"]["Value.$"] == "$.training.model_s3_uri" and record["Parameters"]["Overwrite"] is True
    assert states["Done"]["End"] is True
    assert states["Done"]["Parameters"]["model_s3_uri.$"] == "$.training.model_s3_uri"


def test_input_is_checked_by_the_machine_too(definitions):
    (choice,) = definitions["dev"]["States"]["ValidateInput"]["Choices"]
    matches = [c["StringMatches"] for c in choice["And"] if "StringMatches" in c]
    assert matches == ["s3://<import:ExportsOutputRefArtifactBucket7410C9EF659B6D66>/datasets/*"]
    refused = _refused_spellings(choice, "$.hyperparameters.merge")
    assert {"false", "False", "0", "no", "off"} <= refused and not refused & {"true", "True", "1"}
    assert {"Not": {"Variable": "$.hyperparameters.sagemaker_torch_distributed_enabled", "IsPresent": True}} in (
        choice["And"]
    )


def test_the_machine_knows_the_names_train_py_accepts(definitions):
    """Unknown names are counted at run time against the list synthesized from train.py's parser."""
    states = definitions["dev"]["States"]
    known = states["ReadHyperparameters"]["Parameters"]["known"]
    assert sorted(known) == hyperparameter_names() and set(known.values()) == {"k"}
    assert "help" not in known and not RESERVED & set(known)
    (rule,) = states["HyperparameterNames"]["Choices"]
    assert rule == {"Variable": "$.check.count", "NumericEquals": len(known), "Next": "DatasetMarker"}
    (values,) = states["HyperparameterValues"]["Choices"]
    typed = {c["Or"][1]["Variable"].removeprefix("$.hyperparameters.") for c in values["And"] if "Or" in c}
    assert typed == set(known)


def _refused_spellings(choice: dict, variable: str) -> set[str]:
    """The strings ValidateInput refuses at `variable` (a `Not(And(IsPresent, Or(StringEquals...)))` rule)."""
    (rule,) = [
        c["Not"]["And"]
        for c in choice["And"]
        if "And" in c.get("Not", {}) and c["Not"]["And"][0]["Variable"] == variable
    ]
    assert rule[0] == {"Variable": variable, "IsPresent": True}
    return {c["StringEquals"] for c in rule[1]["Or"]}


def test_the_machine_checks_the_job_shape_rules_too(definitions, distributed):
    """One GPU: fsdp true is refused; several GPUs: method other than qlora is (config + tool do the same)."""
    (single,) = definitions["dev"]["States"]["ValidateInput"]["Choices"]
    assert {"true", "True", "1", "yes"} <= _refused_spellings(single, "$.hyperparameters.fsdp")
    assert "method" not in json.dumps(single)
    (several,) = distributed["States"]["ValidateInput"]["Choices"]
    assert {
        "Or": [
            {"Not": {"Variable": "$.hyperparameters.method", "IsPresent": True}},
            {"Variable": "$.hyperparameters.method", "StringEquals": "qlora"},
        ]
    } in several["And"]
    assert "$.hyperparameters.fsdp" not in json.dumps(several)


@pytest.mark.parametrize("env", ENVS)
def test_logging_all_with_retention_kms_and_xray(templates, env):
    template = templates[env]["Training"]
    (machine,) = resources_of(template, "AWS::StepFunctions::StateMachine").values()
    props = machine["Properties"]
    assert props["LoggingConfiguration"]["Level"] == "ALL"
    assert props["LoggingConfiguration"]["IncludeExecutionData"] is True
    assert props["TracingConfiguration"] == {"Enabled": True}
    assert "StateMachineName" not in props
    (log_group,) = resources_of(template, "AWS::Logs::LogGroup").values()
    assert log_group["Properties"]["RetentionInDays"] == CONFIGS[env].training.log_retention_days
    assert "ArtifactKey" in log_group["Properties"]["KmsKeyId"]["Fn::ImportValue"]
    assert "LogGroupName" not in log_group["Properties"]
    assert any("WorkflowPolicy" in d for d in machine["DependsOn"]), "log delivery permissions must exist first"


def test_dataset_uploads_start_an_execution(templates):
    template = templates["dev"]["Training"]
    (rule,) = resources_of(template, "AWS::Events::Rule").values()
    pattern = rule["Properties"]["EventPattern"]
    assert pattern["source"] == ["aws.s3"] and pattern["detail-type"] == ["Object Created"]
    # once per dataset: on its completion marker, not on each shard (test_workflow_execution.py matches events)
    assert pattern["detail"]["object"] == {"key": [{"wildcard": "datasets/*/_READY"}]}
    assert "ArtifactBucket" in pattern["detail"]["bucket"]["name"][0]["Fn::ImportValue"]
    (target,) = rule["Properties"]["Targets"]
    assert target["Arn"]["Ref"].startswith("WorkflowStateMachine")
    transformer = target["InputTransformer"]
    assert transformer["InputPathsMap"] == {
        "detail-bucket-name": "$.detail.bucket.name",
        "detail-object-key": "$.detail.object.key",
        "detail-object-version-id": "$.detail.object.version-id",  # the marker's version, for the lineage
    }
    assert json.loads(_rule_input(transformer["InputTemplate"], "b", "d/k", "v1")) == {
        "train_data": "s3://b/d/k",
        "hyperparameters": {},
        "dataset_marker_version_id": "v1",
    }


def _rule_input(template: str, bucket: str, key: str, version: str | None) -> str:
    """The InputTemplate filled as the EventBridge user guide shows: a placeholder inside a JSON string takes the
    value as it is, one outside takes its JSON text (`"instance": <instance>` -> `"instance": "i-0123456789"`)."""
    assert '"<detail-object-version-id>"' not in template  # outside a string: a JSON value, null when absent
    filled = {
        "<detail-bucket-name>": bucket,
        "<detail-object-key>": key,
        "<detail-object-version-id>": json.dumps(version),
    }
    for placeholder, value in filled.items():
        template = template.replace(placeholder, value)
    return template


@pytest.mark.parametrize("env", ENVS)
def test_topic_is_kms_encrypted_and_outputs_exist(templates, env):
    template = templates[env]["Training"]
    (topic,) = resources_of(template, "AWS::SNS::Topic").values()
    assert "ArtifactKey" in topic["Properties"]["KmsMasterKeyId"]["Fn::ImportValue"]
    assert {"StateMachineArn", "FailureTopicArn", "ModelParameterName"} <= set(template["Outputs"])


def test_image_mapping_has_us_east_1(templates):
    mappings = templates["dev"]["Training"]["Mappings"]
    (mapping,) = mappings.values()
    assert mapping["us-east-1"]["HfPytorchTrainingGpuUri"].startswith(
        "763104351884.dkr.ecr.us-east-1.amazonaws.com/huggingface-pytorch-training:"
    )


def _code_asset(assemblies, env: str) -> dict[str, bytes]:
    import tarfile

    directory = Path(assemblies[env].directory)
    manifest = json.loads((directory / f"llm-inf2-{env}-Training.assets.json").read_text())
    sources = [a["source"] for a in manifest["files"].values() if a["source"]["path"].endswith(".tar.gz")]
    assert len(sources) == 1 and sources[0]["packaging"] == "file"  # uploaded as built, not re-zipped
    with tarfile.open(directory / sources[0]["path"]) as tar:
        return {m.name: tar.extractfile(m).read() for m in tar.getmembers() if m.isfile()}


def test_training_code_asset_is_the_deterministic_tarball(assemblies):
    files = _code_asset(assemblies, "dev")
    assert "train.py" in files and "finetune/metrics.py" in files
    assert files["requirements.txt"] == (ROOT / "training_code/qlora/requirements.txt").read_bytes()


def test_offline_code_asset_leaves_pip_nothing_to_install(assemblies):
    """Isolated prod: script mode still runs `pip install -r requirements.txt`; the file lists nothing."""
    files = _code_asset(assemblies, "prod")
    assert files["train.py"] == (ROOT / "training_code/qlora/train.py").read_bytes()
    lines = files["requirements.txt"].decode().splitlines()
    assert lines and all(line.startswith("#") for line in lines), lines


def test_own_image_is_pullable_by_the_job_role_only_from_its_repository(templates):
    from tests.stacks.training.test_training_iam import statement

    pull = statement(templates["prod"]["Training"], "TrainingRole", "PullTrainingImage")
    rendered = "".join(_render(p) for p in pull["Resource"]["Fn::Join"][1])
    assert rendered == "arn:aws:ecr:us-east-1:123456789012:repository/llm-inf2-training"


def test_a_derived_prefix_too_long_for_job_names_is_a_config_error():
    from stacks.application import environment_facts
    from stacks.config import ConfigError
    from stacks.training.stack import job_name_prefix
    from stacks.training.workflow import MAX_JOB_NAME, max_job_name_length

    config = CONFIGS["dev"]
    assert max_job_name_length(job_name_prefix(config.training, environment_facts(config))) <= MAX_JOB_NAME
    long_name = load_config("dev", ROOT / "config")
    object.__setattr__(long_name, "app_name", "a-rather-long-app-name-x")
    with pytest.raises(ConfigError, match="training.job_name_prefix: got 'a-rather-long-app-name-x-dev'"):
        job_name_prefix(long_name.training, environment_facts(long_name))


def test_rule_input_passes_the_manual_start_validator(templates):
    from stacks.training.execution_input import validate_execution_input

    (rule,) = resources_of(templates["dev"]["Training"], "AWS::Events::Rule").values()
    template = rule["Properties"]["Targets"][0]["InputTransformer"]["InputTemplate"]
    bucket = "llm-inf2-dev-data-artifactbucket-x1"
    event_input = json.loads(_rule_input(template, bucket, "datasets/a/_READY", "3sL4kqtJlcpXroDTDmJ+rmSpXd3dIbrH"))
    assert event_input["train_data"] == f"s3://{bucket}/datasets/a/_READY"
    # the tool normalises the marker to its folder, as the machine's DatasetMarker state does
    assert validate_execution_input(event_input, bucket=bucket) == {
        **event_input,
        "train_data": f"s3://{bucket}/datasets/a/",
    }


def test_data_key_lets_cloudwatch_logs_encrypt_only_log_groups_of_this_account(templates):
    (key,) = resources_of(templates["dev"]["Data"], "AWS::KMS::Key").values()
    (logs,) = [s for s in key["Properties"]["KeyPolicy"]["Statement"] if s.get("Sid") == "CloudWatchLogsOfThisAccount"]
    assert logs["Principal"]["Service"]["Fn::Join"][1] == ["logs.", {"Ref": "AWS::Region"}, ".amazonaws.com"]
    condition = logs["Condition"]["ArnLike"]["kms:EncryptionContext:aws:logs:arn"]["Fn::Join"][1]
    assert condition[-1] == ":log-group:*" and {"Ref": "AWS::AccountId"} in condition


@pytest.fixture(scope="module")
def distributed(tmp_path_factory):
    """dev on two ml.g5.12xlarge (8 GPUs, FSDP), Data and Training only: the torchrun launch in the template."""
    import yaml

    from tests.synth import synth, templates

    folder = tmp_path_factory.mktemp("distributed")
    config = yaml.safe_load((ROOT / "config" / "dev.yaml").read_text())
    config["training"].update(instance_type="ml.g5.12xlarge", instance_count=2)
    config["training"]["hyperparameters"]["fsdp"] = "true"
    config.update(serving=None, pruning={"enabled": False})
    (folder / "dev.yaml").write_text(yaml.safe_dump(config))
    return definition(templates(synth(load_config("dev", folder), folder / "cdk.out"))["Training"])


def test_several_gpus_launch_train_py_with_torchrun(distributed, definitions):
    params = distributed["States"]["Train"]["Parameters"]
    assert params["ResourceConfig"]["InstanceType"] == "ml.g5.12xlarge"
    assert params["ResourceConfig"]["InstanceCount"] == 2
    assert params["EnableInterContainerTrafficEncryption"] is True
    fixed = distributed["States"]["Defaults"]["Result"]["fixed"]
    assert fixed["sagemaker_torch_distributed_enabled"] == "true"
    assert fixed["sagemaker_instance_type"] == "ml.g5.12xlarge"
    assert "sagemaker_distributed_dataparallel_enabled" not in fixed  # SMDDP is another library
    assert distributed["States"]["Defaults"]["Result"]["config"]["fsdp"] == "true"
    # One checkpoint prefix per execution, shared by every host (rank 0 / each rank's shards sync into it).
    assert params["CheckpointConfig"]["LocalPath"] == "/opt/ml/checkpoints"
    for env in ENVS:  # one GPU: plain `python train.py`, no launcher keys
        single = definitions[env]["States"]["Defaults"]["Result"]["fixed"]
        assert not {"sagemaker_torch_distributed_enabled", "sagemaker_instance_type"} & set(single)


@pytest.mark.parametrize("env", ENVS)
def test_eval_data_adds_an_eval_channel_like_the_training_one(definitions, env):
    states = definitions[env]["States"]
    assert states["Prepare"]["Next"] == "EvalData"
    assert states["EvalData"] == {
        "Type": "Choice",
        "Choices": [{"Variable": "$.eval_data", "IsPresent": True, "Next": "TrainWithEval"}],
        "Default": "Train",
    }
    train, train_eval = states["Train"], states["TrainWithEval"]
    plain, with_eval = train["Parameters"]["InputDataConfig"], train_eval["Parameters"]["InputDataConfig"]
    # the twin job states differ in the channel list only
    assert {**train_eval, "Parameters": {**train_eval["Parameters"], "InputDataConfig": plain}} == train
    assert [c["ChannelName"] for c in plain] == ["training", "model", "code"][: len(plain)]
    assert "eval" not in {c["ChannelName"] for c in plain}
    *rest, eval_channel = with_eval
    assert rest == plain
    assert eval_channel == {
        **plain[0],
        "ChannelName": "eval",
        "DataSource": {"S3DataSource": {**plain[0]["DataSource"]["S3DataSource"], "S3Uri.$": "$.eval_data"}},
    }
    # a capacity retry goes through EvalData again, so it keeps (or keeps out) the eval channel
    assert states["NextAttempt"]["Next"] == "EvalData"


def test_eval_data_is_checked_by_the_machine_when_present(definitions):
    (choice,) = definitions["dev"]["States"]["ValidateInput"]["Choices"]
    (optional,) = [c["Or"] for c in choice["And"] if "Or" in c]
    assert optional[0] == {"Not": {"Variable": "$.eval_data", "IsPresent": True}}
    assert optional[1]["And"] == [
        {"Variable": "$.eval_data", "IsString": True},
        {
            "Variable": "$.eval_data",
            "StringMatches": "s3://<import:ExportsOutputRefArtifactBucket7410C9EF659B6D66>/datasets/*",
        },
        {"Not": {"Variable": "$.eval_data", "StringMatches": "*/_READY"}},  # a marker stands for train_data only
    ]


@pytest.mark.parametrize("env", ENVS)
def test_a_capacity_retry_is_a_new_job_that_resumes_the_same_checkpoints(definitions, env):
    """Spot interruptions are SageMaker's own restart within the job; a capacity failure is a new job (new
    name: SageMaker never reuses one) on the same run name, hence the same checkpoint prefix, and train.py
    resumes from its newest complete checkpoint there."""
    states = definitions[env]["States"]
    carried = states["NextAttempt"]["Parameters"]
    assert carried["name.$"] == "$.run.name" and carried["hyperparameters.$"] == "$.run.hyperparameters"
    assert carried["attempt.$"] == "States.MathAdd($.run.attempt, 1)"
    assert states["NextAttempt"]["ResultPath"] == "$.run"
    params = states["Train"]["Parameters"]
    assert "$.run.attempt" in params["TrainingJobName.$"]
    assert params["CheckpointConfig"]["S3Uri.$"].endswith("/checkpoints/{}/', $.run.name)")
    assert params["CheckpointConfig"]["LocalPath"] == "/opt/ml/checkpoints"
