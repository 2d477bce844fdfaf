"""Every IAM policy document of a synthesized app with its intrinsics resolved to concrete ARNs, for linters.

A linter such as parliament checks ARNs, actions and condition keys as strings; CloudFormation intrinsics
(Ref, Fn::GetAtt, Fn::Join, Fn::ImportValue, ...) are resolved here to what they deploy as in a fixed
account and region. An intrinsic this resolver does not know fails the test instead of being skipped.
"""

from __future__ import annotations

import re
import uuid
from typing import Any

ACCOUNT, REGION, PARTITION = "123456789012", "us-east-1", "aws"
POLICY_PROPERTIES = {
    "AWS::IAM::ManagedPolicy": ("PolicyDocument",),
    "AWS::IAM::Policy": ("PolicyDocument",),
    "AWS::IAM::Role": ("AssumeRolePolicyDocument",),
    "AWS::KMS::Key": ("KeyPolicy",),
    "AWS::S3::BucketPolicy": ("PolicyDocument",),
    "AWS::SNS::TopicPolicy": ("PolicyDocument",),
}
PSEUDO = {
    "AWS::AccountId": ACCOUNT,
    "AWS::Region": REGION,
    "AWS::Partition": PARTITION,
    "AWS::URLSuffix": "amazonaws.com",
    "AWS::NoValue": None,
}


class Resolver:
    """Resolves intrinsics of the templates of one app ({stack name: template})."""

    def __init__(self, templates: dict[str, dict]):
        self.templates = templates
        self.exports = {
            output["Export"]["Name"]: (stack, output["Value"])
            for stack, template in templates.items()
            for output in (template.get("Outputs") or {}).values()
            if isinstance(output.get("Export"), dict)
        }

    def resolve(self, stack: str, node: Any) -> Any:
        if isinstance(node, list):
            return [self.resolve(stack, item) for item in node]
        if not isinstance(node, dict):
            return node
        if len(node) == 1:
            ((name, arg),) = node.items()
            handler = getattr(self, "_" + name.replace("Fn::", "fn_").replace("::", "_"), None)
            if name == "Ref" or name.startswith("Fn::"):
                if handler is None:
                    raise KeyError(f"{stack}: no resolver for {name}")
                return handler(stack, arg)
        return {key: self.resolve(stack, value) for key, value in node.items()}

    def _resource(self, stack: str, logical_id: str) -> str:
        resource = self.templates[stack]["Resources"].get(logical_id)
        if resource is None:
            raise KeyError(f"{stack}: Ref/GetAtt to unknown {logical_id}")
        return resource["Type"]

    def _Ref(self, stack: str, target: str) -> Any:
        if target in PSEUDO:
            return PSEUDO[target]
        if target == "AWS::StackId":  # a UUID per stack, as CloudFormation gives each new stack
            return f"arn:aws:cloudformation:{REGION}:{ACCOUNT}:stack/{stack}/{uuid.uuid5(uuid.NAMESPACE_URL, stack)}"
        kind, name = self._resource(stack, target), target.lower()
        arns = {
            "AWS::SNS::Topic": f"arn:aws:sns:{REGION}:{ACCOUNT}:{name}",
            "AWS::StepFunctions::StateMachine": f"arn:aws:states:{REGION}:{ACCOUNT}:stateMachine:{name}",
            "AWS::SSM::Parameter": f"/{name}",
        }
        return arns.get(kind, name)

    def _fn_GetAtt(self, stack: str, arg: Any) -> str:
        logical_id, attribute = arg if isinstance(arg, list) else arg.split(".", 1)
        kind, name = self._resource(stack, logical_id), logical_id.lower()
        arns = {
            ("AWS::IAM::Role", "Arn"): f"arn:aws:iam::{ACCOUNT}:role/{name}",
            ("AWS::Logs::LogGroup", "Arn"): f"arn:aws:logs:{REGION}:{ACCOUNT}:log-group:{name}:*",
            ("AWS::S3::Bucket", "Arn"): f"arn:aws:s3:::{name}",
            ("AWS::KMS::Key", "Arn"): f"arn:aws:kms:{REGION}:{ACCOUNT}:key/{name}",
            ("AWS::SNS::Topic", "TopicArn"): f"arn:aws:sns:{REGION}:{ACCOUNT}:{name}",
            ("AWS::EC2::SecurityGroup", "GroupId"): f"sg-{abs(hash(name)) % 10**17:017d}",
            ("AWS::StepFunctions::StateMachine", "Arn"): f"arn:aws:states:{REGION}:{ACCOUNT}:stateMachine:{name}",
        }
        if (kind, attribute) not in arns:
            raise KeyError(f"{stack}: no resolver for GetAtt {kind}.{attribute}")
        return arns[(kind, attribute)]

    def _fn_Join(self, stack: str, arg: list) -> str:
        separator, parts = arg
        return separator.join(str(self.resolve(stack, part)) for part in self.resolve(stack, parts))

    def _fn_Select(self, stack: str, arg: list) -> Any:
        index, items = arg
        return self.resolve(stack, items)[int(self.resolve(stack, index))]

    def _fn_Split(self, stack: str, arg: list) -> list[str]:
        separator, text = arg
        return str(self.resolve(stack, text)).split(separator)

    def _fn_FindInMap(self, stack: str, arg: list) -> Any:
        name, first, second = (self.resolve(stack, part) for part in arg)
        return self.templates[stack]["Mappings"][name][first][second]

    def _fn_Sub(self, stack: str, arg: Any) -> str:
        text, extra = (arg, {}) if isinstance(arg, str) else arg

        def one(match: re.Match) -> str:
            key = match.group(1)
            if key in extra:
                return str(self.resolve(stack, extra[key]))
            ref, _, attribute = key.partition(".")
            return str(self._fn_GetAtt(stack, [ref, attribute]) if attribute else self._Ref(stack, ref))

        return re.sub(r"\$\{([^}!]+)\}", one, text)

    def _fn_ImportValue(self, stack: str, arg: Any) -> Any:
        source, value = self.exports[self.resolve(stack, arg)]
        return self.resolve(source, value)


def policy_documents(templates: dict[str, dict]) -> list[tuple[str, str, dict]]:
    """(stack, '<logical id>.<property>', resolved document) of every policy document in the templates."""
    resolver = Resolver(templates)
    found = []
    for stack, template in sorted(templates.items()):
        for logical_id, resource in sorted(template["Resources"].items()):
            props = resource.get("Properties", {})
            for prop in POLICY_PROPERTIES.get(resource["Type"], ()):
                if prop in props:
                    found.append((stack, f"{logical_id}.{prop}", resolver.resolve(stack, props[prop])))
            for inline in props.get("Policies") or [] if resource["Type"] == "AWS::IAM::Role" else []:
                found.append(
                    (
                        stack,
                        f"{logical_id}.Policies.{inline['PolicyName']}",
                        resolver.resolve(stack, inline["PolicyDocument"]),
                    )
                )
    return found
