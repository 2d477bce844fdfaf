"""The execution role of a SageMaker training-type job (QLoRA training, NAS jobs), scoped to what one run touches."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from aws_cdk import ArnFormat, Aws, Stack
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_s3_assets as s3_assets
from constructs import Construct

from .acknowledgments import AWS_REQUIRES_STAR, ENI_REASON, Wildcard, acknowledge_wildcards
from .placement import Placement

TRAINING_LOG_GROUP = "/aws/sagemaker/TrainingJobs"


class SageMakerJobRole(Construct):
    """Reads the code and `read_prefixes`, writes `write_prefixes`, pulls one image, writes its own log streams."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        bucket: s3.IBucket,
        key: kms.IKey,
        code: s3_assets.Asset | None,
        job_name_prefix: str,
        read_prefixes: Sequence[str],
        write_prefixes: Sequence[str],
        prefix_reasons: Mapping[str, str],
        image_repository_arn: str,
        vpc: Placement | None,
        description: str,
        policy_description: str,
        code_channel: bool = False,
        extra_statements: Sequence[iam.PolicyStatement] = (),
    ) -> None:
        """`vpc`: the subnets and security groups the jobs run in (None: no VPC config);
        `prefix_reasons`: why the jobs need every object under each read or write prefix (cdk-nag's IAM5);
        `code_channel`: isolated mode, SageMaker downloads the code as an S3Prefix channel (lists, then gets);
        `extra_statements`: what the jobs need beyond these, derived by their stack (no wildcards to acknowledge)."""
        super().__init__(scope, construct_id)
        stack = Stack.of(self)
        self.role = iam.Role(
            self,
            "Role",
            assumed_by=iam.ServicePrincipal(
                "sagemaker.amazonaws.com", conditions={"StringEquals": {"aws:SourceAccount": Aws.ACCOUNT_ID}}
            ),
            description=description,
        )
        statements = [
            *_storage_statements(
                bucket=bucket, key=key, code=code, read_prefixes=read_prefixes, write_prefixes=write_prefixes
            ),
            *_runtime_statements(stack, job_name_prefix=job_name_prefix, image_repository_arn=image_repository_arn),
        ]
        if code_channel:
            statements.append(
                iam.PolicyStatement(
                    sid="ListTrainingCode",
                    actions=["s3:ListBucket"],
                    resources=[code.bucket.bucket_arn],
                    conditions={"StringLike": {"s3:prefix": [code.s3_object_key]}},
                )
            )
        if vpc is not None:
            statements += vpc_statements(stack, vpc)
        self.policy = iam.ManagedPolicy(
            self,
            "Policy",
            description=policy_description,
            statements=[*statements, *extra_statements],
            roles=[self.role],
        )
        prefixes = dict.fromkeys([*read_prefixes, *write_prefixes])
        acknowledge_wildcards(
            self.policy,
            [
                *(Wildcard(bucket.arn_for_objects(f"{p}*"), prefix_reasons[p]) for p in prefixes),
                *_runtime_wildcards(stack, job_name_prefix=job_name_prefix, vpc=vpc is not None),
                *(vpc_wildcards(stack) if vpc is not None else []),
            ],
        )


def _runtime_wildcards(stack: Stack, *, job_name_prefix: str, vpc: bool) -> list[Wildcard]:
    describe = "; EC2 Describe* calls for the VPC config, this region" if vpc else ""
    return [
        Wildcard(
            "*",
            f"{AWS_REQUIRES_STAR} (ecr:GetAuthorizationToken; cloudwatch:PutMetricData pinned to the "
            f"{TRAINING_LOG_GROUP} namespace{describe})",
        ),
        Wildcard(
            _log_group_arn(stack, f"{TRAINING_LOG_GROUP}:*"),
            f"SageMaker creates and describes the account-wide {TRAINING_LOG_GROUP} log group; writes are "
            "limited to own streams.",
        ),
        Wildcard(
            _log_group_arn(stack, f"{TRAINING_LOG_GROUP}:log-stream:{job_name_prefix}-*"),
            "Log streams are named after the generated job names, which all start with this environment's prefix.",
        ),
    ]


def _log_group_arn(stack: Stack, name: str) -> str:
    return stack.format_arn(
        service="logs", resource="log-group", resource_name=name, arn_format=ArnFormat.COLON_RESOURCE_NAME
    )


def _storage_statements(
    *,
    bucket: s3.IBucket,
    key: kms.IKey,
    code: s3_assets.Asset | None,
    read_prefixes: Sequence[str],
    write_prefixes: Sequence[str],
) -> list[iam.PolicyStatement]:
    """The code (a job running the image's own program has none), the inputs under `read_prefixes`, the
    outputs under `write_prefixes`, the data key."""
    code_statements = (
        []
        if code is None
        else [
            iam.PolicyStatement(
                sid="ReadTrainingCode",
                actions=["s3:GetObject"],
                resources=[code.bucket.arn_for_objects(code.s3_object_key)],
            ),
        ]
    )
    return [
        *code_statements,
        iam.PolicyStatement(
            sid="ReadInputs",
            actions=["s3:GetObject"],
            resources=[bucket.arn_for_objects(f"{p}*") for p in read_prefixes],
        ),
        iam.PolicyStatement(
            sid="ListInputs",
            actions=["s3:ListBucket"],
            resources=[bucket.bucket_arn],
            conditions={"StringLike": {"s3:prefix": [f"{p}*" for p in read_prefixes]}},
        ),
        iam.PolicyStatement(
            sid="WriteOutputs",
            actions=["s3:PutObject", "s3:AbortMultipartUpload"],
            resources=[bucket.arn_for_objects(f"{p}*") for p in write_prefixes],
        ),
        iam.PolicyStatement(
            sid="UseDataKey",
            actions=["kms:Decrypt", "kms:Encrypt", "kms:GenerateDataKey", "kms:DescribeKey"],
            resources=[key.key_arn],
        ),
        iam.PolicyStatement(
            sid="GrantVolumeKey",
            actions=["kms:CreateGrant"],
            resources=[key.key_arn],
            conditions={"Bool": {"kms:GrantIsForAWSResource": "true"}},
        ),
    ]


def _runtime_statements(stack: Stack, *, job_name_prefix: str, image_repository_arn: str) -> list[iam.PolicyStatement]:
    """The image, the job's own log streams, its metrics namespace."""
    return [
        iam.PolicyStatement(
            sid="PullTrainingImage",
            actions=["ecr:BatchCheckLayerAvailability", "ecr:GetDownloadUrlForLayer", "ecr:BatchGetImage"],
            resources=[image_repository_arn],
        ),
        iam.PolicyStatement(
            sid="EcrToken",  # GetAuthorizationToken has no resource-level permissions
            actions=["ecr:GetAuthorizationToken"],
            resources=["*"],
        ),
        iam.PolicyStatement(
            sid="TrainingLogGroup",
            actions=["logs:CreateLogGroup", "logs:DescribeLogStreams"],
            resources=[_log_group_arn(stack, name) for name in (TRAINING_LOG_GROUP, f"{TRAINING_LOG_GROUP}:*")],
        ),
        iam.PolicyStatement(
            sid="OwnLogStreams",
            actions=["logs:CreateLogStream", "logs:PutLogEvents"],
            resources=[_log_group_arn(stack, f"{TRAINING_LOG_GROUP}:log-stream:{job_name_prefix}-*")],
        ),
        iam.PolicyStatement(
            sid="TrainingMetrics",  # PutMetricData has no resource-level permissions; the namespace is pinned
            actions=["cloudwatch:PutMetricData"],
            resources=["*"],
            conditions={"StringEquals": {"cloudwatch:namespace": TRAINING_LOG_GROUP}},
        ),
    ]


def _interfaces(stack: Stack) -> str:
    return stack.format_arn(service="ec2", resource="network-interface", resource_name="*")


def vpc_wildcards(stack: Stack) -> list[Wildcard]:
    """The network interfaces of vpc_statements: SageMaker creates them, so no id exists before."""
    return [Wildcard(_interfaces(stack), ENI_REASON)]


def vpc_statements(stack: Stack, placement: Placement) -> list[iam.PolicyStatement]:
    """ENI management SageMaker performs in the role's name, limited to the placement's subnets and groups.

    CreateNetworkInterface authorizes the new interface, its subnet and its security groups, so the subnets
    and groups are named; the permission and delete calls act on an existing interface and are limited to
    interfaces in those subnets (`ec2:Subnet`). The Describe calls have no resource type: `*`, this region.
    """

    def arns(kind: str, ids: Sequence[str]) -> list[str]:
        return [stack.format_arn(service="ec2", resource=kind, resource_name=i) for i in ids]

    subnets = arns("subnet", placement.subnet_ids)
    interfaces = _interfaces(stack)
    return [
        iam.PolicyStatement(
            sid="CreateJobNetworkInterfaces",
            actions=["ec2:CreateNetworkInterface"],
            resources=[interfaces, *subnets, *arns("security-group", placement.security_group_ids)],
        ),
        iam.PolicyStatement(
            sid="ManageJobNetworkInterfaces",
            actions=[
                "ec2:CreateNetworkInterfacePermission",
                "ec2:DeleteNetworkInterface",
                "ec2:DeleteNetworkInterfacePermission",
            ],
            resources=[interfaces],
            conditions={"ArnEquals": {"ec2:Subnet": subnets}},
        ),
        iam.PolicyStatement(
            sid="DescribeVpcNetwork",  # the EC2 Describe* calls have no resource-level permissions
            actions=[
                "ec2:DescribeNetworkInterfaces",
                "ec2:DescribeVpcs",
                "ec2:DescribeDhcpOptions",
                "ec2:DescribeSubnets",
                "ec2:DescribeSecurityGroups",
            ],
            resources=["*"],
            conditions={"StringEquals": {"aws:RequestedRegion": stack.region}},
        ),
    ]
