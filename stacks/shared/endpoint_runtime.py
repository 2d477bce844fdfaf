"""What every SageMaker endpoint execution role needs besides its model and image, and why its wildcards are wide."""

from __future__ import annotations

from aws_cdk import ArnFormat, Stack
from aws_cdk import aws_iam as iam

from .acknowledgments import AWS_REQUIRES_STAR, Wildcard
from .sagemaker_endpoint import ENDPOINT_LOG_GROUPS, SAGEMAKER_NAMESPACE


def endpoint_runtime_statements(stack: Stack) -> list[iam.PolicyStatement]:
    """What every endpoint execution role needs besides its model and image: ECR login, writing its own log
    groups, and publishing its metrics."""
    return [
        iam.PolicyStatement(sid="EcrLogin", actions=["ecr:GetAuthorizationToken"], resources=["*"]),
        iam.PolicyStatement(
            sid="EndpointLogs",
            actions=["logs:CreateLogGroup", "logs:CreateLogStream", "logs:DescribeLogStreams", "logs:PutLogEvents"],
            resources=[
                stack.format_arn(
                    service="logs",
                    resource="log-group",
                    resource_name=f"{ENDPOINT_LOG_GROUPS}*",
                    arn_format=ArnFormat.COLON_RESOURCE_NAME,
                )
            ],
        ),
        iam.PolicyStatement(
            sid="EndpointMetrics",
            actions=["cloudwatch:PutMetricData"],
            resources=["*"],
            conditions={"StringLike": {"cloudwatch:namespace": ["/aws/sagemaker/*", SAGEMAKER_NAMESPACE]}},
        ),
    ]


def endpoint_runtime_wildcards(stack: Stack, *, vpc: bool = False) -> list[Wildcard]:
    """Why endpoint_runtime_statements' wildcards are as wide as they are (cdk-nag's IAM5)."""
    describe = "; in isolated mode the EC2 Describe* calls SageMaker makes for the model's VPC config" if vpc else ""
    star = f"{AWS_REQUIRES_STAR} (ecr:GetAuthorizationToken; cloudwatch:PutMetricData pinned to the SageMaker "
    logs = stack.format_arn(
        service="logs",
        resource="log-group",
        resource_name=f"{ENDPOINT_LOG_GROUPS}*",
        arn_format=ArnFormat.COLON_RESOURCE_NAME,
    )
    return [
        Wildcard("*", f"{star}endpoint namespaces{describe})"),
        Wildcard(
            logs,
            "Endpoint log groups are named after the CloudFormation-generated endpoint names, which the role "
            "cannot reference without a dependency cycle.",
        ),
    ]
