"""The two places where moto 5.2 cannot take our real templates, patched narrowly and idempotently.

1. moto's SageMaker instance-type list predates ml.inf2: only `ml.inf2.*` is let through; every
   other type still goes through moto's own list.
2. moto's CloudFormation handler for AWS::KMS::Key passes CloudFormation's `Key`/`Value` tags to the
   KMS API model, which expects `TagKey`/`TagValue`, and crashes: the tags are translated. It also keeps
   the KeyPolicy as the template's JSON object where the API model keeps a string (DescribeKey then
   answers 500): the policy is serialised as the API would receive it.
3. Likewise AWS::SSM::Parameter: CloudFormation's Tags map is turned into the list moto expects.
"""

from __future__ import annotations

import json

from moto.kms import models as kms_models
from moto.sagemaker import models as sagemaker_models
from moto.ssm import models as ssm_models

_FLAG = "_llm_inf2_patched"


def allow_inf2_instance_types() -> None:
    cls = sagemaker_models.FakeEndpointConfig
    if getattr(cls.validate_instance_type, _FLAG, False):
        return
    original = cls.validate_instance_type

    def validate_instance_type(self, instance_type: str) -> None:
        if instance_type.startswith("ml.inf2."):
            return
        original(self, instance_type)

    setattr(validate_instance_type, _FLAG, True)
    cls.validate_instance_type = validate_instance_type


def translate_kms_key_tags() -> None:
    cls = kms_models.Key
    original = cls.create_from_cloudformation_json.__func__
    if getattr(original, _FLAG, False):
        return

    def create_from_cloudformation_json(klass, resource_name, cloudformation_json, account_id, region_name, **kw):
        properties = dict(cloudformation_json.get("Properties", {}))
        properties["Tags"] = [
            {"TagKey": t["Key"], "TagValue": t["Value"]} if "Key" in t else t for t in properties.get("Tags", [])
        ]
        if isinstance(properties.get("KeyPolicy"), dict):
            properties["KeyPolicy"] = json.dumps(properties["KeyPolicy"])
        patched = {**cloudformation_json, "Properties": properties}
        return original(klass, resource_name, patched, account_id, region_name, **kw)

    setattr(create_from_cloudformation_json, _FLAG, True)
    cls.create_from_cloudformation_json = classmethod(create_from_cloudformation_json)


def translate_ssm_parameter_tags() -> None:
    """AWS::SSM::Parameter takes Tags as a {key: value} map; moto's handler expects a Key/Value list and crashes."""
    cls = ssm_models.Parameter
    original = cls.create_from_cloudformation_json.__func__
    if getattr(original, _FLAG, False):
        return

    def create_from_cloudformation_json(klass, resource_name, cloudformation_json, account_id, region_name, **kw):
        properties = dict(cloudformation_json.get("Properties", {}))
        tags = properties.get("Tags")
        if isinstance(tags, dict):
            properties["Tags"] = [{"Key": k, "Value": v} for k, v in tags.items()]
        patched = {**cloudformation_json, "Properties": properties}
        return original(klass, resource_name, patched, account_id, region_name, **kw)

    setattr(create_from_cloudformation_json, _FLAG, True)
    cls.create_from_cloudformation_json = classmethod(create_from_cloudformation_json)


def apply_all() -> None:
    allow_inf2_instance_types()
    translate_kms_key_tags()
    translate_ssm_parameter_tags()
