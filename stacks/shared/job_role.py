"""The execution role of SageMaker training-type jobs (QLoRA, compile, NAS jobs), derived from their requests."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from aws_cdk import ArnFormat, Aws, Stack
from aws_cdk import aws_iam as iam
from constructs import Construct

from .acknowledgments import AWS_REQUIRES_STAR, ENI_REASON, Wildcard, acknowledge_wildcards
from .job_access import JobAccess, JobAccessError, S3Scope, ordered_prefixes, refusals
from .placement import Placement

TRAINING_LOG_GROUP = "/aws/sagemaker/TrainingJobs"


class SageMakerJobRole(Construct):
    """The execution role of the job steps that name it: each step extends it with what its request reads and
    writes (`extend`), and the state machine that runs the steps renders its one policy (`finish`). Built with
    `fixed`, the role holds that access only, and a step needing more is refused at synth."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        job_name_prefix: str,
        description: str,
        policy_description: str,
        fixed: JobAccess | None = None,
    ) -> None:
        """`job_name_prefix`: every job running as this role is named `<prefix>-...` (its log streams' scope)."""
        super().__init__(scope, construct_id)
        self._prefix = job_name_prefix
        self.role = iam.Role(
            self,
            "Role",
            assumed_by=iam.ServicePrincipal(
                "sagemaker.amazonaws.com", conditions={"StringEquals": {"aws:SourceAccount": Aws.ACCOUNT_ID}}
            ),
            description=description,
        )
        self.policy = iam.ManagedPolicy(self, "Policy", description=policy_description, roles=[self.role])
        self._fixed = fixed
        self._accesses: list[JobAccess] = [fixed] if fixed is not None else []
        self._finished = False

    @property
    def role_arn(self) -> str:
        return self.role.role_arn

    def extend(self, step: str, access: JobAccess) -> None:
        """`step` (its construct path) runs as this role and needs `access`; a fixed role that lacks part of it
        refuses the step in one line naming the step, the location and the missing action."""
        if self._finished:
            raise ValueError(f"{step}: {self.node.path} was rendered before this step named it")
        if self._fixed is None:
            self._accesses.append(access)
            return
        held_reads = [loc.scope for loc in self._fixed.reads] + list(self._fixed.code)
        lines = refusals(
            step, self.node.path, access, reads=held_reads, writes=[loc.scope for loc in self._fixed.writes]
        )
        if lines:
            raise JobAccessError(lines[0])

    def finish(self) -> None:
        """Write the policy from every access declared so far (once; the state machine calls it)."""
        if self._finished:
            return
        self._finished = True
        stack = Stack.of(self)
        reads = ordered_prefixes(loc.scope for a in self._accesses for loc in a.reads)
        writes = ordered_prefixes(loc.scope for a in self._accesses for loc in a.writes)
        objects = _unique(
            [*(s for a in self._accesses for s in a.code), *(loc.scope for a in self._accesses for loc in a.reads)],
            exact_only=True,
        )
        listed = _unique([loc.scope for a in self._accesses for loc in a.reads], exact_only=True)
        placement = _placement(a.placement for a in self._accesses)
        statements = [
            *_storage_statements(
                objects=objects, reads=reads, writes=writes, keys=_first_seen(a.key_arn for a in self._accesses)
            ),
            *_runtime_statements(
                stack,
                job_name_prefix=self._prefix,
                image_repository_arns=_first_seen(i.repository_arn for a in self._accesses for i in a.images),
            ),
        ]
        if listed:
            statements.append(
                iam.PolicyStatement(
                    sid="ListTrainingCode",
                    actions=["s3:ListBucket"],
                    resources=_first_seen(s.bucket_arn for s in listed),
                    conditions={"StringLike": {"s3:prefix": [s.key for s in listed]}},
                )
            )
        if placement is not None:
            statements += vpc_statements(stack, placement)
        secrets = {(s.name, s.arn): s for a in self._accesses for s in a.secrets}
        statements += [st for secret in secrets.values() for st in secret.statements()]
        self.policy.add_statements(*statements)
        acknowledge_wildcards(
            self.policy,
            [
                *(Wildcard(s.objects, s.reason) for s in ordered_prefixes([*reads, *writes])),
                *_runtime_wildcards(stack, job_name_prefix=self._prefix, vpc=placement is not None),
                *(vpc_wildcards(stack) if placement is not None else []),
            ],
        )


def _first_seen(values: Iterable[str]) -> list[str]:
    return list(dict.fromkeys(values))


def _unique(scopes: Iterable[S3Scope], *, exact_only: bool) -> list[S3Scope]:
    return list(dict.fromkeys(s for s in scopes if not (exact_only and s.is_prefix)))


def _placement(placements: Iterable[Placement | None]) -> Placement | None:
    """The subnets and security groups of every step's VPC config (None: no step has one)."""
    given = [p for p in placements if p is not None]
    if not given:
        return None
    return Placement(
        subnet_ids=_first_seen(i for p in given for i in p.subnet_ids),
        security_group_ids=_first_seen(i for p in given for i in p.security_group_ids),
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
    *, objects: Sequence[S3Scope], reads: Sequence[S3Scope], writes: Sequence[S3Scope], keys: Sequence[str]
) -> list[iam.PolicyStatement]:
    """The code objects (a job running the image's own program has none), the inputs under the read prefixes,
    the outputs under the write prefixes, the data key."""
    statements = []
    if objects:
        statements.append(
            iam.PolicyStatement(
                sid="ReadTrainingCode", actions=["s3:GetObject"], resources=[s.objects for s in objects]
            )
        )
    if reads:
        statements += [
            iam.PolicyStatement(sid="ReadInputs", actions=["s3:GetObject"], resources=[s.objects for s in reads]),
            iam.PolicyStatement(
                sid="ListInputs",
                actions=["s3:ListBucket"],
                resources=_first_seen(s.bucket_arn for s in reads),
                conditions={"StringLike": {"s3:prefix": [s.pattern for s in reads]}},
            ),
        ]
    if writes:
        statements.append(
            iam.PolicyStatement(
                sid="WriteOutputs",
                actions=["s3:PutObject", "s3:AbortMultipartUpload"],
                resources=[s.objects for s in writes],
            )
        )
    return [
        *statements,
        iam.PolicyStatement(
            sid="UseDataKey",
            actions=["kms:Decrypt", "kms:Encrypt", "kms:GenerateDataKey", "kms:DescribeKey"],
            resources=list(keys),
        ),
        iam.PolicyStatement(
            sid="GrantVolumeKey",
            actions=["kms:CreateGrant"],
            resources=list(keys),
            conditions={"Bool": {"kms:GrantIsForAWSResource": "true"}},
        ),
    ]


def _runtime_statements(
    stack: Stack, *, job_name_prefix: str, image_repository_arns: Sequence[str]
) -> list[iam.PolicyStatement]:
    """The images, the jobs' own log streams, their metrics namespace."""
    return [
        iam.PolicyStatement(
            sid="PullTrainingImage",
            actions=["ecr:BatchCheckLayerAvailability", "ecr:GetDownloadUrlForLayer", "ecr:BatchGetImage"],
            resources=list(image_repository_arns),
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
