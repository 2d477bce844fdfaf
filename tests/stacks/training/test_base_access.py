"""What a training job is given about its base: the record's facts it checks the weights against, and for a gated
hub model the token's secret, which the job role reads (and decrypts with its key through Secrets Manager only);
the token itself is in no template. staging, a gated record of its own, synthesized once with cdk-nag on."""

from __future__ import annotations

import json
import shutil

import pytest
import yaml

from stacks.code_contract.loader import load_code_module
from stacks.config import load_config
from stacks.paths import QLORA_CODE
from tests.stacks.training.test_training_stack import definition
from tests.synth import ROOT, add_record, synth, templates

SECRET = "arn:aws:secretsmanager:us-east-1:123456789012:secret:llm-inf2/hub-token-AbC123"
SECRET_KEY = "arn:aws:kms:us-east-1:123456789012:key/1234abcd-12ab-34cd-56ef-1234567890ab"
GATED = "test/gated-qwen-7b"


@pytest.fixture(scope="module")
def gated(tmp_path_factory) -> dict[str, dict]:
    """staging training a gated base with its token's secret and the secret's customer-managed key."""
    folder = tmp_path_factory.mktemp("gated") / "config"
    shutil.copytree(ROOT / "config", folder)
    add_record(folder, GATED, "qwen2.5-7b-instruct", gated=True)
    config = yaml.safe_load((folder / "staging.yaml").read_text())
    config["training"]["hyperparameters"]["model_id"] = GATED
    config["training"].update(hub_token_secret=SECRET, hub_token_kms_key=SECRET_KEY)
    (folder / "staging.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    return templates(synth(load_config("staging", folder), folder.parent / "cdk.out"))


def _statements(template: dict) -> list[dict]:
    return [
        statement
        for resource in template["Resources"].values()
        if resource["Type"] in ("AWS::IAM::ManagedPolicy", "AWS::IAM::Policy")
        for statement in resource["Properties"]["PolicyDocument"]["Statement"]
    ]


def _actions(statement: dict) -> list[str]:
    actions = statement["Action"]
    return actions if isinstance(actions, list) else [actions]


def test_the_job_roles_read_exactly_the_named_secret(gated):
    """The training job's role and the benchmark job's (staging's base comes by its hub id to both)."""
    training = gated["Training"]
    readers = [s for s in _statements(training) if any(a.startswith("secretsmanager:") for a in _actions(s))]
    reads = {
        "Sid": "ReadHubTokenSecret",
        "Effect": "Allow",
        "Action": "secretsmanager:GetSecretValue",
        "Resource": SECRET,
    }
    assert readers == [reads, reads]
    policies = [
        resource["Properties"]["Description"]
        for resource in training["Resources"].values()
        if resource["Type"] == "AWS::IAM::ManagedPolicy"
        and reads in resource["Properties"]["PolicyDocument"]["Statement"]
    ]
    assert [p.split(":")[0] for p in sorted(policies)] == ["Benchmark job", "QLoRA training job"]  # their own roles


def test_the_secrets_key_decrypts_only_through_secrets_manager_for_that_secret(gated):
    """kms:ViaService as AWS documents it for Secrets Manager (`secretsmanager.<region>.amazonaws.com`), and the
    encryption context Secrets Manager sets on each of the secret's values (SecretARN)."""
    decrypts = [s for s in _statements(gated["Training"]) if s["Resource"] == SECRET_KEY]
    assert decrypts == 2 * [  # the training job's role and the benchmark job's
        {
            "Sid": "DecryptHubTokenSecret",
            "Effect": "Allow",
            "Action": "kms:Decrypt",
            "Resource": SECRET_KEY,
            "Condition": {
                "StringEquals": {
                    "kms:ViaService": "secretsmanager.us-east-1.amazonaws.com",
                    "kms:EncryptionContext:SecretARN": SECRET,
                }
            },
        }
    ]


def test_the_job_is_given_the_secrets_arn_in_its_environment(gated):
    states = definition(gated["Training"])["States"]
    jobs = {name: s["Parameters"] for name, s in states.items() if "AlgorithmSpecification" in s.get("Parameters", {})}
    assert {"Train", "TrainWithEval"} <= set(jobs)
    assert jobs["Train"]["Environment"] == jobs["TrainWithEval"]["Environment"]
    assert jobs["Train"]["Environment"]["HF_TOKEN_SECRET_ARN"] == SECRET
    assert jobs["Benchmark"]["Environment"] == {"HF_TOKEN_SECRET_ARN": SECRET}  # it downloads the base by hub id too
    hyperparameters = states["Defaults"]["Result"]
    assert SECRET not in json.dumps(hyperparameters)  # not a hyperparameter: an execution cannot point it elsewhere


def test_the_job_is_given_its_bases_record_to_check_the_weights_against(gated):
    """The facts train.py compares (finetune/base_record.py), as the record's YAML file has them."""
    checked = load_code_module(QLORA_CODE, "finetune/base_record.py").CHECKED_FACTS
    record = yaml.safe_load((ROOT / "config" / "models" / "qwen2.5-7b-instruct.yaml").read_text())  # its facts
    environment = definition(gated["Training"])["States"]["Train"]["Parameters"]["Environment"]
    given = json.loads(environment["BASE_MODEL_RECORD"])
    assert given == {
        "record": "config/models/gated-qwen-7b.yaml",
        "hub_id": GATED,
        **{name: record[name] for name in checked},
    }
    assert set(checked) < set(record)


def test_a_gated_base_with_its_tokens_secret_or_an_uploaded_copy_synthesizes(gated, tmp_path):
    """The gated record's rule is met either way; the synth above is the secret's way."""
    assert "Training" in gated
    shutil.copytree(ROOT / "config", tmp_path / "config")
    folder = tmp_path / "config"
    add_record(folder, GATED, "qwen2.5-7b-instruct", gated=True)
    config = yaml.safe_load((folder / "staging.yaml").read_text())
    config["training"]["hyperparameters"]["model_id"] = GATED
    config["training"]["base_model_key"] = "base-models/gated-qwen-7b/"
    (folder / "staging.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    assert load_config("staging", folder).training.hub_token_secret is None


def test_a_record_too_long_for_the_jobs_environment_is_refused_in_one_line(tmp_path):
    """Each Environment value is at most botocore's TrainingEnvironmentValue maximum; a hub id long enough to
    overflow it is refused at synth, naming the record."""
    import botocore.session

    from stacks.config import ConfigError
    from stacks.training.base_access import job_environment

    limit = botocore.session.get_session().get_service_model("sagemaker").shape_for("TrainingEnvironmentValue")
    folder = tmp_path / "config"
    shutil.copytree(ROOT / "config", folder)
    long_id = add_record(folder, "o" * 300 + "/gated-long", "qwen2.5-7b-instruct")
    config = yaml.safe_load((folder / "staging.yaml").read_text())
    config["training"]["hyperparameters"]["model_id"] = long_id
    (folder / "staging.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    staging = load_config("staging", folder)
    with pytest.raises(ConfigError) as caught:
        job_environment(staging.training, staging.base_model)
    line = str(caught.value)
    assert line.startswith(f"{folder / 'models' / 'gated-long.yaml'}: hub_id: the facts a training run checks")
    assert line.endswith(
        f"characters; the job's environment value holds at most {limit.metadata['max']} (SageMaker CreateTrainingJob "
        "Environment value): shorten the hub id"
    )
