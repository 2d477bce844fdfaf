"""Isolated mode (network.isolated): prod runs in a VPC without internet access, dev keeps SageMaker's network."""

from __future__ import annotations

import pytest

from stacks.config import load_config
from stacks.network.stack import INTERFACE_ENDPOINTS
from tests.stacks.training.test_training_stack import definition, resources_of
from tests.synth import ROOT, SERVED

OPEN = {"0.0.0.0/0", "::/0"}
SERVICES = {"sagemaker.api", "sagemaker.runtime", "sts", "logs", "ecr.api", "ecr.dkr"}


def _one(template: dict, resource_type: str) -> dict:
    (found,) = resources_of(template, resource_type).values()
    return found["Properties"]


def _service(endpoint: dict) -> str:
    """com.amazonaws.<region>.<service> as the endpoint's Fn::Join renders it."""
    name = endpoint["Properties"]["ServiceName"]
    return "".join(p for p in name["Fn::Join"][1] if isinstance(p, str)).removeprefix("com.amazonaws.").lstrip(".")


def test_only_prod_is_isolated():
    assert load_config("prod", ROOT / "config").network.isolated
    assert not load_config("dev", ROOT / "config").network.isolated


def test_network_stack_only_where_isolated(templates):
    assert "Network" in templates["prod"]
    assert "Network" not in templates["dev"]


def test_vpc_has_private_subnets_and_no_way_out(templates):
    network = templates["prod"]["Network"]
    types = {r["Type"] for r in network["Resources"].values()}
    assert "AWS::EC2::VPC" in types
    assert not types & {
        "AWS::EC2::NatGateway",
        "AWS::EC2::InternetGateway",
        "AWS::EC2::VPCGatewayAttachment",
        "AWS::EC2::EgressOnlyInternetGateway",
        "AWS::EC2::EIP",
    }
    subnets = resources_of(network, "AWS::EC2::Subnet")
    assert 2 <= len(subnets) <= 3, "one private subnet per AZ"
    assert all(s["Properties"]["MapPublicIpOnLaunch"] is False for s in subnets.values())
    routes = resources_of(network, "AWS::EC2::Route")
    assert not routes, "isolated subnets route nowhere but inside the VPC (and to the S3 gateway endpoint)"


def test_vpc_endpoints(templates):
    network = templates["prod"]["Network"]
    endpoints = resources_of(network, "AWS::EC2::VPCEndpoint").values()
    gateways = [e for e in endpoints if e["Properties"].get("VpcEndpointType") == "Gateway"]
    interfaces = [e for e in endpoints if e["Properties"].get("VpcEndpointType") == "Interface"]
    assert [_service(g) for g in gateways] == ["s3"]
    assert gateways[0]["Properties"]["RouteTableIds"]
    assert {_service(i) for i in interfaces} == SERVICES and len(interfaces) == len(INTERFACE_ENDPOINTS)
    assert all(i["Properties"]["PrivateDnsEnabled"] is True for i in interfaces)


def test_flow_logs_to_an_encrypted_retained_log_group(templates):
    network = templates["prod"]["Network"]
    flow_log = _one(network, "AWS::EC2::FlowLog")
    assert flow_log["ResourceType"] == "VPC" and flow_log["TrafficType"] == "ALL"
    assert flow_log["LogDestinationType"] == "cloud-watch-logs"
    ((group_id, group),) = resources_of(network, "AWS::Logs::LogGroup").items()
    assert flow_log["LogGroupName"] == {"Ref": group_id}
    assert "ArtifactKey" in group["Properties"]["KmsKeyId"]["Fn::ImportValue"]
    assert group["Properties"]["RetentionInDays"] == 365
    assert group["DeletionPolicy"] == "Retain"


@pytest.mark.parametrize("env", ["dev", "prod"])
def test_no_open_ingress_anywhere(templates, env):
    for unit, template in templates[env].items():
        for logical_id, resource in template["Resources"].items():
            props = resource.get("Properties", {})
            rules = []
            if resource["Type"] == "AWS::EC2::SecurityGroup":
                rules = props.get("SecurityGroupIngress", [])
            elif resource["Type"] == "AWS::EC2::SecurityGroupIngress":
                rules = [props]
            for rule in rules:
                assert rule.get("CidrIp") not in OPEN and rule.get("CidrIpv6") not in OPEN, f"{unit}/{logical_id}"


def test_job_security_group_admits_only_itself(templates):
    network = templates["prod"]["Network"]
    groups = resources_of(network, "AWS::EC2::SecurityGroup")
    job_id = next(k for k in groups if k.startswith("JobSecurityGroup"))
    endpoint_id = next(k for k in groups if k.startswith("EndpointSecurityGroup"))
    ingress = [r["Properties"] for r in resources_of(network, "AWS::EC2::SecurityGroupIngress").values()]
    into_jobs = [r for r in ingress if r["GroupId"] == {"Fn::GetAtt": [job_id, "GroupId"]}]
    assert into_jobs == [{**into_jobs[0], "SourceSecurityGroupId": {"Fn::GetAtt": [job_id, "GroupId"]}}]
    into_endpoints = [r for r in ingress if r["GroupId"] == {"Fn::GetAtt": [endpoint_id, "GroupId"]}]
    assert [(r["FromPort"], r["ToPort"], r["SourceSecurityGroupId"]) for r in into_endpoints] == [
        (443, 443, {"Fn::GetAtt": [job_id, "GroupId"]})
    ]
    egress = groups[job_id]["Properties"]["SecurityGroupEgress"]
    assert all(rule["FromPort"] == rule["ToPort"] == 443 for rule in egress), "HTTPS out only (S3 gateway)"
    egress_rules = [r["Properties"] for r in resources_of(network, "AWS::EC2::SecurityGroupEgress").values()]
    destinations = {r["DestinationSecurityGroupId"]["Fn::GetAtt"][0] for r in egress_rules}
    assert destinations == {job_id, endpoint_id}


def test_isolated_training_job(templates):
    params = definition(templates["prod"]["Training"])["States"]["Train"]["Parameters"]
    assert params["EnableNetworkIsolation"] is True
    assert params["EnableInterContainerTrafficEncryption"] is True
    vpc = params["VpcConfig"]
    assert len(vpc["Subnets"]) >= 2 and all("PrivateSubnet" in s for s in vpc["Subnets"])
    assert len(vpc["SecurityGroupIds"]) == 1 and "JobSecurityGroup" in vpc["SecurityGroupIds"][0]
    channels = {c["ChannelName"]: c["DataSource"]["S3DataSource"] for c in params["InputDataConfig"]}
    assert set(channels) == {"training", "model", "code"}
    assert channels["model"]["S3Uri"].endswith("/base-models/llama-2-7b-chat-hf/")
    assert channels["code"]["S3Uri"].endswith(".gz")


def test_isolated_training_has_no_hub_id_and_local_code(templates):
    machine = definition(templates["prod"]["Training"])
    text = str(machine)
    assert "NousResearch" not in text, "no hub model id reaches an isolated job"
    assert "/opt/ml/input/data/code/" in text, "the code comes through the `code` channel"


def test_isolated_lmi_model(templates):
    model = _one(templates["prod"]["Serving"], "AWS::SageMaker::Model")
    assert model["EnableNetworkIsolation"] is True
    assert len(model["VpcConfig"]["Subnets"]) >= 2 and len(model["VpcConfig"]["SecurityGroupIds"]) == 1
    container = model["PrimaryContainer"]
    source = container["ModelDataSource"]["S3DataSource"]
    assert source["S3DataType"] == "S3Prefix" and source["CompressionType"] == "None"
    assert source["S3Uri"]["Fn::Join"][1][-1] == f"/{SERVED['prod'][4]}"  # the compiled model, mounted
    assert "ModelDataUrl" not in container, "ModelDataSource and ModelDataUrl exclude each other"
    environment = container["Environment"]
    assert "OPTION_MODEL_ID" not in environment
    assert environment["OPTION_TENSOR_PARALLEL_DEGREE"] == "8"
    assert environment["OPTION_ENGINE"] == "Python"
    assert environment["OPTION_ENTRYPOINT"] == "djl_python.transformers_neuronx"
    assert "OPTION_COMPILED_GRAPH_PATH" not in environment  # LMI loads the partition's folder as its model


def test_isolated_serving_role_may_manage_network_interfaces(templates):
    policy = _one(templates["prod"]["Serving"], "AWS::IAM::ManagedPolicy")
    statements = {s.get("Sid"): s for s in policy["PolicyDocument"]["Statement"]}
    assert statements["CreateJobNetworkInterfaces"]["Action"] == "ec2:CreateNetworkInterface"
    assert "ec2:DeleteNetworkInterface" in statements["ManageJobNetworkInterfaces"]["Action"]
    assert "ReadModelTarball" not in statements


def test_dev_has_no_vpc(templates):
    params = definition(templates["dev"]["Training"])["States"]["Train"]["Parameters"]
    assert params["EnableNetworkIsolation"] is False and "VpcConfig" not in params
    model = _one(templates["dev"]["Serving"], "AWS::SageMaker::Model")
    assert "VpcConfig" not in model and "EnableNetworkIsolation" not in model
    assert "ModelDataSource" not in model["PrimaryContainer"]
    assert "OPTION_MODEL_ID" in model["PrimaryContainer"]["Environment"]


def test_existing_vpc_gets_only_a_job_security_group():
    """vpc_id without security groups: the Network stack holds just the job security group (built alone)."""

    from aws_cdk import App, Stack
    from aws_cdk import aws_kms as kms
    from aws_cdk.assertions import Template

    from stacks.config.network import NetworkConfig
    from stacks.network.stack import NetworkStack

    subnets = ("subnet-0123456789abcdef0", "subnet-0123456789abcdef1")
    network = NetworkConfig(
        isolated=True, vpc_id="vpc-0123456789abcdef0", subnet_ids=subnets, s3_prefix_list_id="pl-63a5400a"
    )
    network.check("test.yaml", "network")
    assert not network.creates_vpc and network.creates_security_group
    app = App()
    key = kms.Key(Stack(app, "Keys"), "Key")
    stack = NetworkStack(app, "Net", network=network, environment_name="llm-inf2-prod", key=key)
    assert list(stack.placement.subnet_ids) == list(subnets) and len(stack.placement.security_group_ids) == 1
    template = Template.from_stack(stack).to_json()
    types = {r["Type"] for r in template["Resources"].values()}
    assert "AWS::EC2::VPC" not in types and "AWS::EC2::VPCEndpoint" not in types
    (group,) = resources_of(template, "AWS::EC2::SecurityGroup").values()
    assert group["Properties"]["VpcId"] == "vpc-0123456789abcdef0"
    egress = group["Properties"].get("SecurityGroupEgress", []) + [
        r["Properties"] for r in resources_of(template, "AWS::EC2::SecurityGroupEgress").values()
    ]
    to_s3 = [r for r in egress if "DestinationPrefixListId" in r]
    assert [(r["DestinationPrefixListId"], r["FromPort"]) for r in to_s3] == [("pl-63a5400a", 443)]
    assert not [r for r in egress if "CidrIp" in r], "no CIDR egress when S3's prefix list is known"
    assert "SecurityGroupIngress" not in group["Properties"]
