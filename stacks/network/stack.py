"""Isolated mode's network: a VPC without any route to the internet, or a job security group in a given VPC.

Created only when `network.isolated: true` and the config does not name the whole placement. The VPC
has private isolated subnets (one per AZ), no NAT and no internet gateway; AWS services are reached
through an S3 gateway endpoint and interface endpoints (SageMaker API/runtime, STS, CloudWatch Logs,
ECR API/DKR, private DNS). Flow logs go to a KMS-encrypted log group.
"""

from __future__ import annotations

from aws_cdk import CfnOutput, RemovalPolicy, Stack
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_logs as logs
from constructs import Construct

from ..config.network import NetworkConfig
from ..shared.acknowledgments import CFN_GUARD, IMPORTED_KEY, acknowledge
from ..shared.placement import Placement

PACKS = ("HIPAA.Security", "NIST.800.53.R5")
_DEFAULT_SG = (
    "Nothing uses the VPC's default security group: every job, model and endpoint names the job security group. "
    "Closing it takes CDK's custom-resource Lambda, itself a new network-attached principal; the VPC has no "
    "internet route either way."
)
_SELF_INGRESS = (
    "The only ingress rule: all traffic from this same security group, for the instances of one multi-instance "
    "training job (NCCL picks its ports); no CIDR source, so nothing outside the group can connect."
)

HTTPS = ec2.Port.tcp(443)
INTERFACE_ENDPOINTS = {
    "SageMakerApi": ec2.InterfaceVpcEndpointAwsService.SAGEMAKER_API,
    "SageMakerRuntime": ec2.InterfaceVpcEndpointAwsService.SAGEMAKER_RUNTIME,
    "Sts": ec2.InterfaceVpcEndpointAwsService.STS,
    "Logs": ec2.InterfaceVpcEndpointAwsService.CLOUDWATCH_LOGS,
    "EcrApi": ec2.InterfaceVpcEndpointAwsService.ECR,
    "EcrDkr": ec2.InterfaceVpcEndpointAwsService.ECR_DOCKER,
}
FLOW_LOG_RETENTION = logs.RetentionDays.ONE_YEAR


class NetworkStack(Stack):
    """`placement` is what the Training and Serving stacks put in their VpcConfig."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        network: NetworkConfig,
        environment_name: str,
        key: kms.IKey,
        **kwargs,
    ) -> None:
        """`environment_name`: `<app>-<env>`, which the job security group's description starts with."""
        super().__init__(scope, construct_id, **kwargs)
        # ec2.Vpc builds its subnets in callbacks, so their creation traces keep the jsii kernel's temporary
        # path: without this the metadata differs between two synths (tests/test_app_determinism.py).
        self.node.set_context("aws:cdk:disable-creation-stack-traces", True)
        if network.vpc_id is None:
            vpc = self._vpc(key)
            subnet_ids = [s.subnet_id for s in vpc.isolated_subnets]
        else:
            # Only the id is used (the security group's VpcId); nothing selects subnets through this reference.
            vpc = ec2.Vpc.from_vpc_attributes(self, "Vpc", vpc_id=network.vpc_id, availability_zones=["unused"])
            subnet_ids = list(network.subnet_ids)
        for pack in PACKS:
            acknowledge(vpc, f"{pack}-VPCDefaultSecurityGroupClosed", _DEFAULT_SG)

        # Jobs and models: no ingress but from each other (multi-instance training), HTTPS out to the endpoints.
        self.security_group = ec2.SecurityGroup(
            self,
            "JobSecurityGroup",
            vpc=vpc,
            allow_all_outbound=False,
            description=f"{environment_name}: SageMaker jobs and models (isolated mode)",
        )
        self.security_group.add_ingress_rule(
            self.security_group, ec2.Port.all_traffic(), "between instances of one training job"
        )
        for pack in PACKS:
            acknowledge(self.security_group, f"{pack}-EC2RestrictedCommonPorts", _SELF_INGRESS)
        self.security_group.add_egress_rule(
            self.security_group, ec2.Port.all_traffic(), "between instances of one training job"
        )
        if network.vpc_id is None:
            self.endpoint_security_group.add_ingress_rule(self.security_group, HTTPS, "SageMaker jobs and models")
            self.security_group.add_egress_rule(self.endpoint_security_group, HTTPS, "interface VPC endpoints")
        # The S3 gateway endpoint is reached at S3's public addresses (its prefix list, whose id needs a lookup
        # unless configured); the VPC has no internet route, so HTTPS egress can only reach the endpoints.
        s3 = ec2.Peer.prefix_list(network.s3_prefix_list_id) if network.s3_prefix_list_id else ec2.Peer.any_ipv4()
        self.security_group.add_egress_rule(s3, HTTPS, "S3 through the gateway endpoint")
        security_group_ids = list(network.security_group_ids) or [self.security_group.security_group_id]
        self.placement = Placement(subnet_ids=subnet_ids, security_group_ids=security_group_ids)
        CfnOutput(self, "SecurityGroupId", value=self.security_group.security_group_id)

    def _vpc(self, key: kms.IKey) -> ec2.Vpc:
        vpc = ec2.Vpc(
            self,
            "Vpc",
            max_azs=3,
            nat_gateways=0,
            subnet_configuration=[
                ec2.SubnetConfiguration(name="Private", subnet_type=ec2.SubnetType.PRIVATE_ISOLATED, cidr_mask=20)
            ],
            restrict_default_security_group=False,
        )
        self.vpc = vpc
        log_group = logs.LogGroup(
            self, "FlowLogs", encryption_key=key, retention=FLOW_LOG_RETENTION, removal_policy=RemovalPolicy.RETAIN
        )
        acknowledge(log_group, f"{CFN_GUARD}cloudwatch_log_group_encrypted_check", IMPORTED_KEY)
        role = iam.Role(
            self,
            "FlowLogRole",
            assumed_by=iam.ServicePrincipal("vpc-flow-logs.amazonaws.com"),
            description="VPC flow logs: write to the flow-log group",
        )
        policy = iam.ManagedPolicy(
            self,
            "FlowLogPolicy",
            roles=[role],
            statements=[
                iam.PolicyStatement(
                    actions=["logs:CreateLogStream", "logs:PutLogEvents", "logs:DescribeLogStreams"],
                    resources=[log_group.log_group_arn],
                )
            ],
        )
        flow_log = vpc.add_flow_log(
            "FlowLog",
            destination=ec2.FlowLogDestination.to_cloud_watch_logs(log_group, role.without_policy_updates()),
            traffic_type=ec2.FlowLogTrafficType.ALL,
        )
        flow_log.node.add_dependency(policy)
        private = ec2.SubnetSelection(subnet_type=ec2.SubnetType.PRIVATE_ISOLATED)
        vpc.add_gateway_endpoint("S3", service=ec2.GatewayVpcEndpointAwsService.S3, subnets=[private])
        self.endpoint_security_group = ec2.SecurityGroup(
            self,
            "EndpointSecurityGroup",
            vpc=vpc,
            allow_all_outbound=False,
            description="Interface VPC endpoints: HTTPS from the SageMaker job security group only",
        )
        for name, service in INTERFACE_ENDPOINTS.items():
            vpc.add_interface_endpoint(
                name,
                service=service,
                subnets=private,
                private_dns_enabled=True,
                open=False,
                security_groups=[self.endpoint_security_group],
            )
        CfnOutput(self, "VpcId", value=vpc.vpc_id)
        return vpc
