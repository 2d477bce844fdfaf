"""Every state machine role holds at least what aws-cdk-lib's own task construct grants for the same integration.

The emulator enforces no IAM, so a missing permission passes every local run and fails the first one in AWS.
The reference is not ours: each integration's L2 task (SageMakerCreateTrainingJob with RUN_JOB, SnsPublish,
CallAwsService) is synthesized here in a throwaway stack and its role policy read back; the tuning job's `.sync`
has no L2 task, so its set is the one the AWS Step Functions developer guide generates. Actions are compared
(IAM action names are case-insensitive); resources are this project's narrower scopes.
"""

from __future__ import annotations

from functools import cache

import pytest
from aws_cdk import App, Stack
from aws_cdk import aws_iam as iam
from aws_cdk import aws_sns as sns
from aws_cdk import aws_stepfunctions as sfn
from aws_cdk import aws_stepfunctions_tasks as tasks

from tests.stacks.environments import ALL_ENVIRONMENTS, all_templates
from tests.stacks.state_machine_requests import integration, resolved_definitions, task_states

# AWS Step Functions Developer Guide, "Tune a machine learning model" sample project (sample-hyper-tuning.md,
# "IAM Examples": the policy Step Functions generates for createHyperParameterTuningJob.sync), minus the
# sample's CreateModel/CreateTransformJob/Lambda; events on rule/StepFunctionsGetEventsForSageMakerTuningJobsRule.
TUNING_SYNC = frozenset(
    {
        "sagemaker:createhyperparametertuningjob",
        "sagemaker:describehyperparametertuningjob",
        "sagemaker:stophyperparametertuningjob",
        "sagemaker:listtags",
        "iam:passrole",
        "events:puttargets",
        "events:putrule",
        "events:describerule",
    }
)


def _actions(statements: list[dict]) -> set[str]:
    found = set()
    for statement in statements:
        if statement.get("Effect", "Allow") == "Allow":
            actions = statement["Action"]
            found |= {a.lower() for a in ([actions] if isinstance(actions, str) else actions)}
    return found


@cache
def cdk_grants() -> dict[str, frozenset[str]]:
    """{Task Resource suffix: actions} that aws-cdk-lib's task constructs put in their state machine's policy."""
    app = App()
    stack = Stack(app, "Reference")
    job_role = iam.Role(stack, "JobRole", assumed_by=iam.ServicePrincipal("sagemaker.amazonaws.com"))
    location = tasks.S3Location.from_json_expression
    built = {
        "sagemaker:createTrainingJob.sync": tasks.SageMakerCreateTrainingJob(
            stack,
            "Train",
            training_job_name="job",
            role=job_role,
            integration_pattern=sfn.IntegrationPattern.RUN_JOB,
            algorithm_specification=tasks.AlgorithmSpecification(training_image=tasks.DockerImage.from_registry("i")),
            input_data_config=[
                tasks.Channel(
                    channel_name="training",
                    data_source=tasks.DataSource(s3_data_source=tasks.S3DataSource(s3_location=location("$.data"))),
                )
            ],
            output_data_config=tasks.OutputDataConfig(s3_output_location=location("$.out")),
            tags={"project": "x"},  # our jobs are tagged: CDK then grants AddTags
        ),
        "sns:publish": tasks.SnsPublish(
            stack, "Publish", topic=sns.Topic(stack, "Topic"), message=sfn.TaskInput.from_text("m")
        ),
        "aws-sdk:ssm:putParameter": tasks.CallAwsService(
            stack, "Put", service="ssm", action="putParameter", parameters={}, iam_resources=["*"]
        ),
    }
    grants = {}
    for resource, task in built.items():
        body = sfn.DefinitionBody.from_chainable(task)
        machine = sfn.StateMachine(stack, f"Machine{len(grants)}", definition_body=body)
        policy = machine.role.node.find_child("DefaultPolicy").document.to_json()
        grants[resource] = frozenset(_actions(stack.resolve(policy)["Statement"]))
    return grants


# CallAwsService grants `<service>:<action>` unless told `iam_action`: its docs' case of an IAM action named
# unlike its API (Service Authorization Reference: ListObjectVersions is authorized by s3:ListBucketVersions,
# HeadObject by s3:GetObject).
IAM_ACTION_OF_API = {("s3", "listObjectVersions"): "s3:ListBucketVersions", ("s3", "headObject"): "s3:GetObject"}


@cache
def call_aws_service_grant(service: str, action: str) -> frozenset[str]:
    """The actions aws-cdk-lib's CallAwsService puts in its state machine's policy for an aws-sdk task."""
    app = App()
    stack = Stack(app, "Reference")
    task = tasks.CallAwsService(
        stack,
        "Call",
        service=service,
        action=action,
        parameters={},
        iam_resources=["*"],
        iam_action=IAM_ACTION_OF_API.get((service, action)),
    )
    machine = sfn.StateMachine(stack, "Machine", definition_body=sfn.DefinitionBody.from_chainable(task))
    policy = machine.role.node.find_child("DefaultPolicy").document.to_json()
    return frozenset(_actions(stack.resolve(policy)["Statement"]))


def expected_actions(resource: str) -> frozenset[str]:
    suffix = resource.split(":::", 1)[1]
    if suffix == "sagemaker:createHyperParameterTuningJob.sync":
        return TUNING_SYNC
    if suffix.startswith("aws-sdk:") and suffix not in cdk_grants():
        return call_aws_service_grant(*suffix.split(":")[1:3])
    if suffix not in cdk_grants():
        raise AssertionError(f"no reference grant for {resource}: add its L2 task to cdk_grants()")
    return cdk_grants()[suffix]


def role_actions(units: dict[str, dict], unit: str, machine_id: str) -> set[str]:
    """Every action the managed and inline policies attached to the state machine's role allow."""
    template = units[unit]
    role_arn = template["Resources"][machine_id]["Properties"]["RoleArn"]
    role_id = role_arn["Fn::GetAtt"][0]
    resources = template["Resources"]
    found = set()
    for resource in resources.values():
        props = resource.get("Properties", {})
        if resource["Type"] in ("AWS::IAM::ManagedPolicy", "AWS::IAM::Policy") and {"Ref": role_id} in props.get(
            "Roles", []
        ):
            found |= _actions(props["PolicyDocument"]["Statement"])
    for inline in resources[role_id]["Properties"].get("Policies", []):
        found |= _actions(inline["PolicyDocument"]["Statement"])
    return found


def test_the_reference_grants_are_what_cdk_and_the_guide_list():
    """The reference itself, so a CDK upgrade that changes it shows here first."""
    assert cdk_grants()["sagemaker:createTrainingJob.sync"] == {
        "sagemaker:createtrainingjob",
        "sagemaker:describetrainingjob",
        "sagemaker:stoptrainingjob",
        "sagemaker:listtags",
        "sagemaker:addtags",
        "iam:passrole",
        "events:puttargets",
        "events:putrule",
        "events:describerule",
    }
    assert cdk_grants()["sns:publish"] == {"sns:publish"}
    assert cdk_grants()["aws-sdk:ssm:putParameter"] == {"ssm:putparameter"}


@pytest.mark.parametrize("env", ALL_ENVIRONMENTS)
def test_every_state_machine_role_holds_what_its_integrations_need(templates, tmp_path_factory, env):
    units = all_templates(templates, tmp_path_factory)[env]
    missing, checked = [], 0
    for machine, definition in resolved_definitions(units).items():
        unit, machine_id = machine.split("/")
        granted = role_actions(units, unit, machine_id)
        for state, task in task_states(definition):
            integration(task["Resource"])  # a Resource we know how to read
            checked += 1
            lacking = expected_actions(task["Resource"]) - granted
            if lacking:
                missing.append(f"{env} {unit} {state} ({task['Resource']}): lacks {sorted(lacking)}")
    assert checked
    assert not missing, "\n".join(missing)
