"""The places where moto 5.2 cannot take our real templates, patched narrowly and idempotently.

1. moto's SageMaker instance-type list predates ml.inf2: only `ml.inf2.*` is let through; every
   other type still goes through moto's own list.
2. moto's CloudFormation handler for AWS::KMS::Key passes CloudFormation's `Key`/`Value` tags to the
   KMS API model, which expects `TagKey`/`TagValue`, and crashes: the tags are translated. It also keeps
   the KeyPolicy as the template's JSON object where the API model keeps a string (DescribeKey then
   answers 500): the policy is serialised as the API would receive it.
3. Likewise AWS::SSM::Parameter: CloudFormation's Tags map is turned into the list moto expects.
4. moto's SageMaker API models model package groups and packages, but its CloudFormation has no
   AWS::SageMaker::ModelPackageGroup: `ModelPackageGroupResource` provisions the template's group through that
   API (Ref: the ARN, GetAtt ModelPackageGroupArn, as CloudFormation documents); it is retained like the bucket,
   and, as on AWS, a new stack adopts no retained group: a name that is taken fails the create.
5. AWS::SageMaker::InferenceComponent, which moto lacks (inference_components.py), and endpoint configs whose
   variant names no model (a component endpoint's).
"""

from __future__ import annotations

import inspect
import json
from collections.abc import Callable

from moto.cloudformation import parsing as cfn_parsing
from moto.cloudformation.exceptions import ValidationError
from moto.core.common_models import CloudFormationModel
from moto.kms import models as kms_models
from moto.sagemaker import models as sagemaker_models
from moto.ssm import models as ssm_models

from .inference_components import InferenceComponentResource, allow_variants_without_a_model, answer_describe_and_list

_FLAG = "_llm_inf2_patched"


def patch_once(owner: type, name: str, build: Callable[[Callable], Callable]) -> None:
    """Replace `owner.name` by `build(original)`, once (a second call finds the mark and does nothing). A
    classmethod or staticmethod stays one: `build` gets and returns the plain function (a classmethod's is
    called with the class first)."""
    raw = inspect.getattr_static(owner, name)
    wrapper = type(raw) if isinstance(raw, (classmethod, staticmethod)) else None
    original = raw.__func__ if wrapper else raw
    if getattr(original, _FLAG, False):
        return
    replacement = build(original)
    setattr(replacement, _FLAG, True)
    setattr(owner, name, wrapper(replacement) if wrapper else replacement)


def allow_inf2_instance_types() -> None:
    def build(original):
        def validate_instance_type(self, instance_type: str) -> None:
            if instance_type.startswith("ml.inf2."):
                return
            original(self, instance_type)

        return validate_instance_type

    patch_once(sagemaker_models.FakeEndpointConfig, "validate_instance_type", build)


def _with_properties(translate: Callable[[dict], None]) -> Callable[[Callable], Callable]:
    """A `create_from_cloudformation_json` builder that hands moto a translated copy of the Properties."""

    def build(original):
        def create_from_cloudformation_json(klass, resource_name, cloudformation_json, account_id, region_name, **kw):
            properties = dict(cloudformation_json.get("Properties", {}))
            translate(properties)
            patched = {**cloudformation_json, "Properties": properties}
            return original(klass, resource_name, patched, account_id, region_name, **kw)

        return create_from_cloudformation_json

    return build


def _kms_key_properties(properties: dict) -> None:
    properties["Tags"] = [
        {"TagKey": t["Key"], "TagValue": t["Value"]} if "Key" in t else t for t in properties.get("Tags", [])
    ]
    if isinstance(properties.get("KeyPolicy"), dict):
        properties["KeyPolicy"] = json.dumps(properties["KeyPolicy"])


def _ssm_parameter_properties(properties: dict) -> None:
    """AWS::SSM::Parameter takes Tags as a {key: value} map; moto's handler expects a Key/Value list and crashes."""
    tags = properties.get("Tags")
    if isinstance(tags, dict):
        properties["Tags"] = [{"Key": k, "Value": v} for k, v in tags.items()]


def translate_kms_key_tags() -> None:
    patch_once(kms_models.Key, "create_from_cloudformation_json", _with_properties(_kms_key_properties))


def translate_ssm_parameter_tags() -> None:
    patch_once(ssm_models.Parameter, "create_from_cloudformation_json", _with_properties(_ssm_parameter_properties))


class ModelPackageGroupResource(CloudFormationModel):
    """AWS::SageMaker::ModelPackageGroup on the emulator: CreateModelPackageGroup in moto's SageMaker backend."""

    def __init__(self, arn: str) -> None:
        self.arn = arn

    @property
    def physical_resource_id(self) -> str:
        return self.arn

    @staticmethod
    def cloudformation_name_type() -> str:
        return "ModelPackageGroupName"

    @staticmethod
    def cloudformation_type() -> str:
        return "AWS::SageMaker::ModelPackageGroup"

    @classmethod
    def has_cfn_attr(cls, attr: str) -> bool:
        return attr == "ModelPackageGroupArn"

    def get_cfn_attribute(self, attribute_name: str) -> str:
        return self.arn

    @classmethod
    def create_from_cloudformation_json(cls, resource_name, cloudformation_json, account_id, region_name, **kw):
        properties = cloudformation_json.get("Properties", {})
        backend = sagemaker_models.sagemaker_backends[account_id][region_name]
        name = properties.get("ModelPackageGroupName", resource_name)
        if name in backend.model_package_groups:  # moto's API would overwrite it; SageMaker and CloudFormation refuse
            raise ValidationError(message=f"{resource_name}: model package group {name} already exists")
        backend.create_model_package_group(
            name, properties.get("ModelPackageGroupDescription", ""), properties.get("Tags")
        )
        return cls(backend.model_package_groups[name].arn)


def provision_model_package_groups() -> None:
    """The resource list is computed once from CloudFormationModel's subclasses: recompute with ours."""
    for cached in (cfn_parsing.get_model_list, cfn_parsing.get_model_map, cfn_parsing.get_name_type_map):
        cached.cache_clear()


def apply_all() -> None:
    allow_inf2_instance_types()
    allow_variants_without_a_model(patch_once)
    answer_describe_and_list()
    assert InferenceComponentResource.cloudformation_type()  # a CloudFormationModel: imported before the recompute
    provision_model_package_groups()
    translate_kms_key_tags()
    translate_ssm_parameter_tags()
