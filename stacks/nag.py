"""cdk-nag rule packs and every accepted finding, in one reviewable table.

Each acknowledgment names one rule on one resource (by construct path inside its stack) with the
reason a security reviewer would accept. `apply_acknowledgments` fails the synth when an entry
matches nothing, so the table cannot rot.
"""

from __future__ import annotations

from dataclasses import dataclass

from aws_cdk import Acknowledgment, App, Stack, Token, Validations
from cdk_nag import AwsSolutionsChecks, HIPAASecurityChecks, NIST80053R5Checks
from constructs import IConstruct

from .control_tower import ControlTowerChecks

RULE_PACKS = (AwsSolutionsChecks, HIPAASecurityChecks, NIST80053R5Checks)

_LOG_BUCKET = (
    "This bucket receives S3 server access logs of the artifact bucket; logging it to itself or to "
    "another bucket would recurse."
)
_REPLICATION = (
    "Cross-region replication is a per-organisation DR decision; the bucket is versioned, retained and "
    "KMS-encrypted, and replication can be added without replacing it."
)

_AWS_REQUIRES_STAR = "These actions have no resource-level permissions, so AWS requires Resource '*'"
_DATA_BUCKET_ARN = "{prefix}-Data:ExportsOutputFnGetAttArtifactBucket7410C9EFArnA3946625"
_LOGS_ARN = "arn:<AWS::Partition>:logs:<AWS::Region>:<AWS::AccountId>"
_ENI_ARN = "arn:<AWS::Partition>:ec2:<AWS::Region>:<AWS::AccountId>:network-interface/*"
_ENI_REASON = (
    "SageMaker creates the job's/model's network interfaces in the role's name; their ids do not exist "
    "before. Creation also requires the placement's subnets and security groups, named in the same "
    "statement; permission and delete calls are limited to interfaces in those subnets (ec2:Subnet)."
)


@dataclass(frozen=True)
class Acknowledged:
    """One accepted finding: stack unit (e.g. 'Data'), construct path inside it, rule id, reason."""

    unit: str
    path: str
    rule: str
    reason: str


ACKNOWLEDGED: tuple[Acknowledged, ...] = (
    Acknowledged("Data", "AccessLogBucket", "AwsSolutions-S1", _LOG_BUCKET),
    Acknowledged("Data", "AccessLogBucket", "HIPAA.Security-S3BucketLoggingEnabled", _LOG_BUCKET),
    Acknowledged("Data", "AccessLogBucket", "NIST.800.53.R5-S3BucketLoggingEnabled", _LOG_BUCKET),
    Acknowledged(
        "Data",
        "AccessLogBucket",
        "HIPAA.Security-S3DefaultEncryptionKMS",
        "S3 server access logging only delivers to SSE-S3 buckets; the logs hold request metadata, not data.",
    ),
    Acknowledged(
        "Data",
        "AccessLogBucket",
        "NIST.800.53.R5-S3DefaultEncryptionKMS",
        "S3 server access logging only delivers to SSE-S3 buckets; the logs hold request metadata, not data.",
    ),
    Acknowledged("Data", "AccessLogBucket", "HIPAA.Security-S3BucketReplicationEnabled", _REPLICATION),
    Acknowledged("Data", "AccessLogBucket", "NIST.800.53.R5-S3BucketReplicationEnabled", _REPLICATION),
    Acknowledged("Data", "ArtifactBucket", "HIPAA.Security-S3BucketReplicationEnabled", _REPLICATION),
    Acknowledged("Data", "ArtifactBucket", "NIST.800.53.R5-S3BucketReplicationEnabled", _REPLICATION),
    *(
        Acknowledged("Serving", "ExecutionPolicy", f"AwsSolutions-IAM5[Resource::{resource}]", reason)
        for resource, reason in (
            (
                "*",
                _AWS_REQUIRES_STAR + " (ecr:GetAuthorizationToken; cloudwatch:PutMetricData pinned to the "
                "SageMaker endpoint namespaces; in isolated mode the EC2 Describe* calls SageMaker makes "
                "for the model's VPC config, pinned to this region)",
            ),
            (_ENI_ARN, _ENI_REASON),
            (
                f"{_DATA_BUCKET_ARN}/{{model_prefix}}*",
                "The LMI container downloads every file of the merged model "
                "under the pinned prefix (serving.model_prefix); read only, nothing else in the bucket.",
            ),
            (
                f"{_DATA_BUCKET_ARN}/{{compiled_graph_prefix}}*",
                "Precompiled Neuron artifacts under the pinned serving.compiled_graph_prefix; read only.",
            ),
            (
                f"{_DATA_BUCKET_ARN}/{{data_capture_prefix}}*",
                "Data capture writes request/response samples under "
                "this environment's capture prefix only (s3:PutObject).",
            ),
            (
                f"{_LOGS_ARN}:log-group:/aws/sagemaker/Endpoints/*",
                "Endpoint log groups are named after the "
                "CloudFormation-generated endpoint name, which the role cannot reference without a dependency cycle.",
            ),
        )
    ),
    *(
        Acknowledged("Training", "TrainingRole/Policy/Resource", f"AwsSolutions-IAM5[Resource::{resource}]", reason)
        for resource, reason in (
            (
                "*",
                _AWS_REQUIRES_STAR + " (ecr:GetAuthorizationToken; cloudwatch:PutMetricData pinned to the "
                "/aws/sagemaker/TrainingJobs namespace; EC2 Describe* calls when a VPC is configured)",
            ),
            (_ENI_ARN, _ENI_REASON),
            (
                f"{_DATA_BUCKET_ARN}/datasets/*",
                "The training job reads the dataset it is given, any object under "
                "datasets/ (the channel is chosen per execution); nothing else in the bucket.",
            ),
            (
                f"{_DATA_BUCKET_ARN}/base-models/*",
                "Network-isolated jobs read the base model from a `model` channel under base-models/; read only.",
            ),
            (
                f"{_DATA_BUCKET_ARN}/checkpoints/*",
                "Checkpoints are written and read back on resume under "
                "checkpoints/<run>/; the run name is generated per execution.",
            ),
            (
                f"{_DATA_BUCKET_ARN}/models/*",
                "The merged model is written under models/<job-name>/; job names "
                "are generated per execution, so the prefix is the narrowest fixed scope.",
            ),
            (
                f"{_LOGS_ARN}:log-group:/aws/sagemaker/TrainingJobs:*",
                "SageMaker creates and describes the "
                "account-wide /aws/sagemaker/TrainingJobs log group; writes are limited to own streams.",
            ),
            (
                f"{_LOGS_ARN}:log-group:/aws/sagemaker/TrainingJobs:log-stream:{{prefix}}-*",
                "Log streams are named after the generated job names, which all start with this environment's prefix.",
            ),
        )
    ),
    Acknowledged(  # `{compile_vpc}`: where the compile job runs in the isolated mode's subnets
        "Training",
        "CompileRole/Policy/Resource",
        f"AwsSolutions-IAM5[Resource::{_ENI_ARN}{{compile_vpc}}]",
        _ENI_REASON,
    ),
    *(  # `{compile}`: only where the Training workflow compiles (the Training stack's nag_details)
        Acknowledged(
            "Training", "CompileRole/Policy/Resource", f"AwsSolutions-IAM5[Resource::{resource}{{compile}}]", reason
        )
        for resource, reason in (
            (
                "*",
                _AWS_REQUIRES_STAR + " (ecr:GetAuthorizationToken; cloudwatch:PutMetricData pinned to the "
                "/aws/sagemaker/TrainingJobs namespace)",
            ),
            (
                f"{_DATA_BUCKET_ARN}/models/*",
                "The compile job reads the merged model under models/<training job>/ "
                "and writes the compiled one beside it; job names are generated per execution.",
            ),
            (
                f"{_LOGS_ARN}:log-group:/aws/sagemaker/TrainingJobs:*",
                "SageMaker creates and describes the "
                "account-wide /aws/sagemaker/TrainingJobs log group; writes are limited to own streams.",
            ),
            (
                f"{_LOGS_ARN}:log-group:/aws/sagemaker/TrainingJobs:log-stream:{{prefix}}-*",
                "Log streams are named after the generated job names, which all start with this environment's prefix.",
            ),
        )
    ),
    Acknowledged(
        "Training",
        "Workflow/Policy/Resource",
        "AwsSolutions-IAM5[Resource::*]",
        _AWS_REQUIRES_STAR + " (CloudWatch Logs vended-log delivery and X-Ray tracing of the state machine).",
    ),
    Acknowledged(
        "Training",
        "Workflow/Policy/Resource",
        "AwsSolutions-IAM5[Resource::arn:<AWS::Partition>:sagemaker:<AWS::Region>:<AWS::AccountId>:"
        "training-job/{prefix}-*]",
        "Training job names are generated per execution; the state machine may create, describe, stop and "
        "tag only jobs whose names start with this environment's prefix.",
    ),
    Acknowledged(
        "Training",
        "Workflow/Policy/Resource",
        "AwsSolutions-IAM5[Resource::arn:<AWS::Partition>:sagemaker:<AWS::Region>:<AWS::AccountId>:model-package/"
        "{prefix}-Data:ModelPackageGroupName/*]",  # the group's name, imported from the Data stack's export
        "SageMaker numbers the versions of a package group itself; only versions in this environment's group, "
        "and only as PendingManualApproval or Rejected (condition sagemaker:ModelApprovalStatus).",
    ),
    Acknowledged(  # `{compiled_folder}`: where the compiled model records its shape (LMI's partition)
        "Training",
        "Workflow/Policy/Resource",
        f"AwsSolutions-IAM5[Resource::{_DATA_BUCKET_ARN}/models/*/{{compiled_folder}}*/output/model/config.json]",
        "The compiled model's own config.json (its shape and compiler), models/<job>/<shape folder>/<compile job>/"
        "output/model/; job names are generated per execution, and only that file of the folder is read.",
    ),
    Acknowledged(
        "Training",
        "Workflow/Policy/Resource",
        f"AwsSolutions-IAM5[Resource::{_DATA_BUCKET_ARN}/models/*/output/model/model_facts.json]",
        "The facts train.py writes into each model folder, models/<job>/output/model/model_facts.json; job names "
        "are generated per execution, and the state machine can read no other object.",
    ),
    Acknowledged(
        "Training",
        "Workflow/Policy/Resource",
        f"AwsSolutions-IAM5[Resource::{_DATA_BUCKET_ARN}/models/*/lineage.json]",
        "One lineage manifest per training job, models/<job>/lineage.json; job names are generated per "
        "execution, and the state machine can write no other object.",
    ),
)


_PRUNING_JOB_POLICIES = ("JobRole/Policy/Resource", "SelectRole/Policy/Resource")
_PRUNING_REASONS = (
    (
        "*",
        _AWS_REQUIRES_STAR + " (ecr:GetAuthorizationToken; cloudwatch:PutMetricData pinned to the "
        "/aws/sagemaker/TrainingJobs namespace)",
    ),
    (
        f"{_DATA_BUCKET_ARN}/pruning-datasets/*",
        "The super-network and trial jobs read the dataset given per "
        "execution, any folder under pruning-datasets/; read only.",
    ),
    (
        f"{_DATA_BUCKET_ARN}/pruning/*",
        "Each run writes and reads back its jobs' outputs, trials, Pareto front and "
        "models under pruning/<run>/; the run name is generated per execution.",
    ),
    (
        f"{_DATA_BUCKET_ARN}/checkpoints/*",
        "Super-network checkpoints are written and read back on resume under "
        "checkpoints/<run>/; the run name is generated per execution.",
    ),
    (
        f"{_LOGS_ARN}:log-group:/aws/sagemaker/TrainingJobs:*",
        "SageMaker creates and describes the account-wide "
        "/aws/sagemaker/TrainingJobs log group; writes are limited to own streams.",
    ),
    (
        f"{_LOGS_ARN}:log-group:/aws/sagemaker/TrainingJobs:log-stream:{{job_prefix}}-*",
        "Log streams are named "
        "after the generated job names (trials too), which all start with this environment's pruning prefix.",
    ),
)
_SAGEMAKER_ARN = "arn:<AWS::Partition>:sagemaker:<AWS::Region>:<AWS::AccountId>"
ACKNOWLEDGED += (
    *(
        Acknowledged("Pruning", path, f"AwsSolutions-IAM5[Resource::{resource}]", reason)
        for path in _PRUNING_JOB_POLICIES
        for resource, reason in _PRUNING_REASONS
        if not (path.startswith("SelectRole") and ("datasets" in resource or "checkpoints" in resource))
    ),
    *(
        Acknowledged(
            "Pruning",
            path,
            f"AwsSolutions-IAM5[Resource::{_SAGEMAKER_ARN}:{kind}/{{job_prefix}}-*]",
            "Job names are generated per execution (trial names by the tuning job); only jobs whose "
            "names start with this environment's pruning prefix.",
        )
        for path in ("Workflow/Policy/Resource", "SelectApiPolicy/Resource")
        for kind in ("training-job", "hyper-parameter-tuning-job")
    ),
    Acknowledged(
        "Pruning",
        "Workflow/Policy/Resource",
        "AwsSolutions-IAM5[Resource::*]",
        _AWS_REQUIRES_STAR + " (CloudWatch Logs vended-log delivery and X-Ray tracing of the state machine).",
    ),
    Acknowledged(
        "Pruning",
        "EndpointPolicy/Resource",
        "AwsSolutions-IAM5[Resource::*{endpoints}]",
        _AWS_REQUIRES_STAR + " (ecr:GetAuthorizationToken; cloudwatch:PutMetricData pinned to the "
        "SageMaker endpoint namespaces)",
    ),
    Acknowledged(
        "Pruning",
        "EndpointPolicy/Resource",
        f"AwsSolutions-IAM5[Resource::{_LOGS_ARN}:log-group:/aws/sagemaker/Endpoints/*{{endpoints}}]",
        "Endpoint log groups are named after the CloudFormation-generated endpoint names, which the role "
        "cannot reference without a dependency cycle.",
    ),
)


_DEFAULT_SG = (
    "Nothing uses the VPC's default security group: every job, model and endpoint names the job security group. "
    "Closing it takes CDK's custom-resource Lambda, itself a new network-attached principal; the VPC has no "
    "internet route either way."
)
_SELF_INGRESS = (
    "The only ingress rule: all traffic from this same security group, for the instances of one multi-instance "
    "training job (NCCL picks its ports); no CIDR source, so nothing outside the group can connect."
)
ACKNOWLEDGED += (
    *(
        Acknowledged("Network", "Vpc", f"{pack}-VPCDefaultSecurityGroupClosed", _DEFAULT_SG)
        for pack in ("HIPAA.Security", "NIST.800.53.R5")
    ),
    *(
        Acknowledged("Network", "JobSecurityGroup", f"{pack}-EC2RestrictedCommonPorts", _SELF_INGRESS)
        for pack in ("HIPAA.Security", "NIST.800.53.R5")
    ),
)


_GUARD = "cdk-validator-cfnguard::"
_IMPORTED_KEY = (
    "KmsKeyId is the data key's ARN, imported from the Data stack (Fn::ImportValue); the rule only "
    "accepts a literal string or a Ref/GetAtt to a key in the same template, so it cannot read it."
)
_NO_OBJECT_LOCK = (
    "Object Lock (WORM) would also block the lifecycle rules that expire noncurrent versions and "
    "aborted uploads; the data is versioned and retained (RETAIN), and a models/ retention lock is "
    "a per-organisation decision not taken here."
)
ACKNOWLEDGED += (
    # AWS Control Tower proactive controls (CT.*), rule names as the cfn-guard plugin reports them.
    Acknowledged("Data", "AccessLogBucket", f"{_GUARD}s3_bucket_logging_enabled_check", _LOG_BUCKET),
    Acknowledged(
        "Data",
        "AccessLogBucket",
        f"{_GUARD}s3_bucket_default_encryption_kms_check",
        "S3 server access logging only delivers to SSE-S3 buckets; the logs hold request metadata.",
    ),
    Acknowledged(
        "Data",
        "AccessLogBucket",
        f"{_GUARD}s3_event_notifications_enabled_check",
        "The bucket only receives S3 server access logs; nothing consumes their object events.",
    ),
    Acknowledged(
        "Data",
        "AccessLogBucket",
        f"{_GUARD}s3_bucket_object_lock_enabled_check",
        "Access logs expire after data.access_log_expiration_days; Object Lock would keep them.",
    ),
    Acknowledged("Data", "ArtifactBucket", f"{_GUARD}s3_bucket_object_lock_enabled_check", _NO_OBJECT_LOCK),
    Acknowledged("Training", "Workflow/Logs", f"{_GUARD}cloudwatch_log_group_encrypted_check", _IMPORTED_KEY),
    Acknowledged("Pruning", "Workflow/Logs", f"{_GUARD}cloudwatch_log_group_encrypted_check", _IMPORTED_KEY),
    Acknowledged("Network", "FlowLogs", f"{_GUARD}cloudwatch_log_group_encrypted_check", _IMPORTED_KEY),
    *(
        Acknowledged(
            unit,
            "Workflow/Logs",
            f"{_GUARD}cloudwatch_log_group_retention_period_check",
            f"Where {field} is under 365 days (dev: 30) the state machine's execution log is kept "
            "that long on purpose: a development environment's run history, not an audit record.",
        )
        for unit, field in (("Training", "training.log_retention_days"), ("Pruning", "pruning.log_retention_days"))
    ),
)


def add_rule_packs(app: App) -> None:
    """Run every pack at synth, and the AWS Control Tower proactive controls (cfn-guard, offline; the rules
    that can match a resource of the templates); an unacknowledged finding makes `app.synth()` fail."""
    Validations.of(app).add_plugins(*(pack(app) for pack in RULE_PACKS), ControlTowerChecks())


def _find(stack: Stack, path: str) -> IConstruct | None:
    node: IConstruct = stack
    for part in path.split("/"):
        child = node.node.try_find_child(part)
        if child is None:
            return None
        node = child
    return node


def apply_acknowledgments(stacks: dict[str, Stack]) -> None:
    """Attach each table entry to its construct; an entry whose construct is gone is an error."""
    pseudo = {unit: _pseudo_values(stack) for unit, stack in stacks.items()}  # read once per stack, not per entry
    for entry in ACKNOWLEDGED:
        stack = stacks.get(entry.unit)
        if stack is None:
            continue
        rule = rule_id(entry, stack, pseudo[entry.unit])
        if rule is None:  # a `{name}` detail that this environment does not have (e.g. no endpoints)
            continue
        target = _find(stack, entry.path)
        if target is None:
            raise LookupError(f"nag acknowledgment {entry.rule} points at missing {entry.unit}/{entry.path}")
        Validations.of(target).acknowledge(Acknowledgment(id=rule, reason=entry.reason))


def _pseudo_values(stack: Stack) -> dict[str, str]:
    """The stack's name and its concrete pseudo parameters, by placeholder (each a jsii round trip)."""
    values = {"{stack_name}": stack.stack_name}
    for placeholder, value in (
        ("<AWS::Partition>", stack.partition),
        ("<AWS::Region>", stack.region),
        ("<AWS::AccountId>", stack.account),
    ):
        if not Token.is_unresolved(value):
            values[placeholder] = value
    return values


def rule_id(entry: Acknowledged, stack: Stack, pseudo: dict[str, str] | None = None) -> str | None:
    """`{prefix}` in a finding detail is the environment's `<app>-<env>` (the stack name without its unit).

    Other `{name}` fields come from the stack's `nag_details` (config values such as the pinned model
    prefix); an entry whose field is None there does not apply to this environment.
    """
    pseudo = pseudo if pseudo is not None else _pseudo_values(stack)
    rule = entry.rule.replace("{prefix}", pseudo["{stack_name}"].removesuffix(f"-{entry.unit}"))
    # cdk-nag prints a pseudo parameter as `<AWS::Region>` only while it is a token; a stack with a concrete
    # region (config `region`, `account`) prints the value itself, and so does the partition derived from it.
    for placeholder, value in pseudo.items():
        if placeholder.startswith("<"):
            rule = rule.replace(placeholder, value)
    for name, value in getattr(stack, "nag_details", {}).items():
        if f"{{{name}}}" in rule:
            if value is None:
                return None
            rule = rule.replace(f"{{{name}}}", value)
    return rule
