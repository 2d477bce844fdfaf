"""Every Task's request, in every environment, within what the API accepts: botocore's max, min, pattern, enum.

ParamValidator (which the compile-step test also runs) checks types, required members and minimums only; the
service refuses the rest at run time, after the deploy (a 333-character ContainerArguments item was one).
Run-time values are checked at their longest where the template determines them (tests/stacks/
state_machine_requests.py): job names `<prefix>-<md5>-<attempt>-<retry>`, output and model S3 URIs.
"""

from __future__ import annotations

import pytest

from tests.stacks.botocore_limits import Unknown, limit_violations
from tests.stacks.environments import ALL_ENVIRONMENTS, all_templates
from tests.stacks.state_machine_requests import resolved_definitions, task_requests, task_states

# Fields the template builds at run time (States.Format of the run name): each must come out known.
BUILT_BY_THE_TEMPLATE = {
    "CreateTrainingJob": ("TrainingJobName", "OutputDataConfig.S3OutputPath"),
    "CreateHyperParameterTuningJob": (
        "HyperParameterTuningJobName",
        "TrainingJobDefinition.OutputDataConfig.S3OutputPath",
    ),
}


@pytest.fixture(scope="module")
def requests(templates, tmp_path_factory):
    """{env: {machine: [TaskRequest]}}."""
    return {
        env: {machine: task_requests(definition) for machine, definition in resolved_definitions(units).items()}
        for env, units in all_templates(templates, tmp_path_factory).items()
    }


def test_every_environment_is_checked(requests):
    assert set(requests) == set(ALL_ENVIRONMENTS) and "local" in ALL_ENVIRONMENTS  # the emulator's too


@pytest.mark.parametrize("env", ALL_ENVIRONMENTS)
def test_every_task_request_is_within_the_api_limits(templates, tmp_path_factory, requests, env):
    definitions = resolved_definitions(all_templates(templates, tmp_path_factory)[env])
    found = []
    for machine, machine_requests in requests[env].items():
        # every Task state is reached by the walk, so none goes unchecked
        assert sorted(r.state for r in machine_requests) == sorted(n for n, _ in task_states(definitions[machine]))
        for request in machine_requests:
            found += [
                f"{env} {machine} {request.state}: {line}"
                for line in limit_violations(request.service, request.operation, request.params)
            ]
    assert not found, "\n".join(found)


def _at(params: dict, dotted: str):
    for part in dotted.split("."):
        params = params[part]
    return params


@pytest.mark.parametrize("env", ALL_ENVIRONMENTS)
def test_job_names_and_output_paths_are_checked_at_their_longest(requests, env):
    """The run-time names are evaluated (not skipped as unknown): the longest attempt and API retry digits."""
    jobs = [r for machine in requests[env].values() for r in machine if r.operation in BUILT_BY_THE_TEMPLATE]
    assert jobs
    for request in jobs:
        for field in BUILT_BY_THE_TEMPLATE[request.operation]:
            value = _at(request.params, field)
            assert isinstance(value, str) and not isinstance(value, Unknown), (request.state, field, value)
        name = request.params.get("TrainingJobName") or request.params["HyperParameterTuningJobName"]
        assert name.endswith("-4"), f"{request.state}: {name} (RetryCount at the Retry's MaxAttempts 4)"
    training = [r for machine in requests[env].values() for r in machine if r.state == "Train"]
    for request in training:  # <prefix>-<md5>-<capacity attempt>-<retry>, the attempt at its Choice's bound
        prefix, digest, attempt, retry = request.params["TrainingJobName"].rsplit("-", 3)
        assert len(digest) == 32 and int(attempt) >= 1 and retry == "4"


CREATE_TRAINING_JOB = {
    "TrainingJobName": "llm-inf2-dev-5d41402abc4b2a76b9719d911017c592-2-4",
    "RoleArn": "arn:aws:iam::123456789012:role/training",
    "AlgorithmSpecification": {"TrainingImage": "x", "TrainingInputMode": "File"},
    "OutputDataConfig": {"S3OutputPath": "s3://bucket/models/"},
    "ResourceConfig": {"InstanceType": "ml.g5.2xlarge", "InstanceCount": 1, "VolumeSizeInGB": 100},
    "StoppingCondition": {"MaxRuntimeInSeconds": 3600},
}


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        (
            {
                "AlgorithmSpecification": {
                    **CREATE_TRAINING_JOB["AlgorithmSpecification"],
                    "ContainerArguments": ["x" * 333],
                }
            },
            "CreateTrainingJob.AlgorithmSpecification.ContainerArguments[0]: 333 characters, max 256 "
            "(TrainingContainerArgument)",
        ),
        (
            {
                "AlgorithmSpecification": {
                    **CREATE_TRAINING_JOB["AlgorithmSpecification"],
                    "ContainerArguments": ["x"] * 101,
                }
            },
            "CreateTrainingJob.AlgorithmSpecification.ContainerArguments: "
            "101 items, max 100 (TrainingContainerArguments)",
        ),
        ({"TrainingJobName": "a" * 64}, "CreateTrainingJob.TrainingJobName: 64 characters, max 63 (TrainingJobName)"),
        (
            {"TrainingJobName": "run_1"},
            "CreateTrainingJob.TrainingJobName: 'run_1' does not match TrainingJobName's "
            "pattern [a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}",
        ),
        (
            {"ResourceConfig": {**CREATE_TRAINING_JOB["ResourceConfig"], "InstanceType": "ml.inf2.xlarge"}},
            "CreateTrainingJob.ResourceConfig.InstanceType: 'ml.inf2.xlarge' is not one of TrainingInstanceType's",
        ),
        (
            {"StoppingCondition": {"MaxRuntimeInSeconds": 0}},
            "CreateTrainingJob.StoppingCondition.MaxRuntimeInSeconds: 0, min 1 (MaxRuntimeInSeconds)",
        ),
        ({"Tags": [{"Key": "team", "Value": "a" * 257}]}, "CreateTrainingJob.Tags[0].Value: 257 characters, max 256"),
        ({"HyperParameters": {"k": "v" * 2501}}, "CreateTrainingJob.HyperParameters['k']: 2501 characters, max 2500"),
        ({"Unexpected": 1}, "CreateTrainingJob.Unexpected: not a member of CreateTrainingJobRequest"),
    ],
)
def test_the_checker_names_each_broken_limit(change, expected):
    assert limit_violations("sagemaker", "CreateTrainingJob", CREATE_TRAINING_JOB) == []
    lines = limit_violations("sagemaker", "CreateTrainingJob", {**CREATE_TRAINING_JOB, **change})
    assert lines and lines[0].startswith(expected), lines


def test_a_run_time_value_is_not_checked_but_a_literal_is():
    params = {**CREATE_TRAINING_JOB, "TrainingJobName": Unknown("$.name")}
    assert limit_violations("sagemaker", "CreateTrainingJob", params) == []
    assert limit_violations("ssm", "PutParameter", {"Name": "/a", "Value": "x", "Type": "string"}) == [
        "PutParameter.Type: 'string' is not one of ParameterType's 3 values"
    ]
