"""AWS::SageMaker::InferenceComponent on the emulator: moto 5.2.5 models no inference components.

CloudFormation creates, updates and deletes a component here, in a registry per account and region that the
emulator's callers read (`components`); SageMaker's rules that the templates rely on are kept: the endpoint and the
model must exist, the variant must be the endpoint's, and an update keeps the component (its name and ARN) and
records the rolling DeploymentConfig it was updated with. The copy count starts at RuntimeConfig.CopyCount;
`scale` moves it as Application Auto Scaling would (0 when idle, back to 1 on a request), each step logged.
DescribeInferenceComponent and ListInferenceComponents answer from the registry in botocore's output shapes, so
boto3 callers read a component's status and copy count as on AWS. moto's endpoint config check also needs a
variant without a model (a component endpoint's) let through.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from moto.cloudformation.exceptions import ValidationError
from moto.core.common_models import CloudFormationModel
from moto.core.responses import ActionResult
from moto.sagemaker import models as sagemaker_models
from moto.sagemaker import responses as sagemaker_responses
from moto.sagemaker.exceptions import ValidationError as SageMakerValidationError


@dataclass
class Component:
    """One inference component as DescribeInferenceComponent would show it (the fields the templates set)."""

    name: str
    arn: str
    endpoint_name: str
    variant_name: str
    specification: dict[str, Any]
    copy_count: int
    status: str = "InService"
    endpoint_arn: str = ""
    updates: list[dict[str, Any]] = field(default_factory=list)  # the DeploymentConfig of each update
    log: list[str] = field(default_factory=list)  # the copy count's steps
    created: datetime = field(default_factory=lambda: datetime.now(UTC))
    modified: datetime = field(default_factory=lambda: datetime.now(UTC))

    @property
    def model_name(self) -> str:
        return self.specification.get("ModelName", "")

    def summary(self) -> dict[str, Any]:
        """InferenceComponentSummary (ListInferenceComponents' items)."""
        return {
            "InferenceComponentName": self.name,
            "InferenceComponentArn": self.arn,
            "EndpointName": self.endpoint_name,
            "EndpointArn": self.endpoint_arn,
            "VariantName": self.variant_name,
            "InferenceComponentStatus": self.status,
            "CreationTime": self.created,
            "LastModifiedTime": self.modified,
        }

    def described(self) -> dict[str, Any]:
        """DescribeInferenceComponent's answer; the desired count is the current one (each step is immediate)."""
        runtime = {"DesiredCopyCount": self.copy_count, "CurrentCopyCount": self.copy_count}
        extra = {"LastDeploymentConfig": self.updates[-1]} if self.updates else {}
        return {**self.summary(), "Specification": self.specification, "RuntimeConfig": runtime, **extra}


_REGISTRY: dict[tuple[str, str], dict[str, Component]] = {}


def components(account_id: str, region_name: str) -> dict[str, Component]:
    """The components of one account and region, by name."""
    return _REGISTRY.setdefault((account_id, region_name), {})


def reset() -> None:
    """Empty every registry, as moto's reset empties its backends (one process may start several servers)."""
    _REGISTRY.clear()


def scale(component: Component, copies: int, why: str) -> None:
    """Set the copy count (the scalable target's DesiredCopyCount) and log the step."""
    component.log.append(f"{component.name}: copies {component.copy_count} -> {copies} ({why})")
    component.copy_count = copies


def _checked(properties: dict[str, Any], account_id: str, region_name: str) -> tuple[str, str, dict[str, Any]]:
    backend = sagemaker_models.sagemaker_backends[account_id][region_name]
    endpoint_name = properties["EndpointName"]
    endpoint = backend.endpoints.get(endpoint_name)
    if endpoint is None:
        raise ValidationError(message=f"Could not find endpoint '{endpoint_name}'.")
    variant = properties.get("VariantName", "")
    config = backend.endpoint_configs[endpoint.endpoint_config_name]
    if variant not in {v["VariantName"] for v in config.production_variants}:
        raise ValidationError(message=f"Endpoint {endpoint_name} has no variant '{variant}'.")
    specification = properties.get("Specification", {})
    model = specification.get("ModelName")
    if model not in backend._models:
        raise ValidationError(message=f"Could not find model '{model}'.")
    return endpoint_name, variant, specification


class InferenceComponentResource(CloudFormationModel):
    """CloudFormation's view of a Component: Ref and GetAtt InferenceComponentArn give its ARN."""

    def __init__(self, component: Component) -> None:
        self.component = component

    @property
    def physical_resource_id(self) -> str:
        return self.component.arn

    @staticmethod
    def cloudformation_name_type() -> str:
        return "InferenceComponentName"

    @staticmethod
    def cloudformation_type() -> str:
        return "AWS::SageMaker::InferenceComponent"

    @classmethod
    def has_cfn_attr(cls, attr: str) -> bool:
        return attr in ("InferenceComponentArn", "InferenceComponentStatus")

    def get_cfn_attribute(self, attribute_name: str) -> str:
        return self.component.arn if attribute_name == "InferenceComponentArn" else self.component.status

    def is_created(self) -> bool:
        return True

    @classmethod
    def create_from_cloudformation_json(cls, resource_name, cloudformation_json, account_id, region_name, **kw):
        properties = cloudformation_json.get("Properties", {})
        name = properties.get("InferenceComponentName", resource_name)
        registry = components(account_id, region_name)
        if name in registry:
            raise ValidationError(message=f"Inference component {name} already exists.")
        endpoint_name, variant, specification = _checked(properties, account_id, region_name)
        arn = f"arn:aws:sagemaker:{region_name}:{account_id}:inference-component/{name}"
        copies = int(properties.get("RuntimeConfig", {}).get("CopyCount", 1))
        endpoint_arn = sagemaker_models.sagemaker_backends[account_id][region_name].endpoints[endpoint_name].arn
        registry[name] = Component(name, arn, endpoint_name, variant, specification, copies, endpoint_arn=endpoint_arn)
        return cls(registry[name])

    @classmethod
    def update_from_cloudformation_json(
        cls, original_resource, new_resource_name, cloudformation_json, account_id, region_name
    ):
        """UpdateInferenceComponent: the same component, its specification replaced, the update's policy kept."""
        properties = cloudformation_json.get("Properties", {})
        component = original_resource.component
        _, _, specification = _checked(properties, account_id, region_name)
        component.updates.append(properties.get("DeploymentConfig", {}))
        component.specification = specification
        component.modified = datetime.now(UTC)
        return original_resource

    @classmethod
    def delete_from_cloudformation_json(cls, resource_name, cloudformation_json, account_id, region_name):
        properties = cloudformation_json.get("Properties", {})
        components(account_id, region_name).pop(properties.get("InferenceComponentName", resource_name), None)


def allow_variants_without_a_model(patch_once) -> None:
    """A component endpoint's variant names no model: moto's check looks one up for every variant."""

    def build(original):
        def validate_production_variants(self, production_variants):
            original(self, [v for v in production_variants if "ModelName" in v])

        return validate_production_variants

    patch_once(sagemaker_models.SageMakerModelBackend, "validate_production_variants", build)


def describe_inference_component(self) -> ActionResult:
    name = self._get_param("InferenceComponentName")
    component = components(self.current_account, self.region).get(name)
    if component is None:
        raise SageMakerValidationError(message=f"Could not find inference component '{name}'.")
    return ActionResult(component.described())


def list_inference_components(self) -> ActionResult:
    """The filters the emulator's callers use (endpoint, variant, status, name part), newest first."""
    wanted = {
        "endpoint_name": self._get_param("EndpointNameEquals"),
        "variant_name": self._get_param("VariantNameEquals"),
        "status": self._get_param("StatusEquals"),
    }
    part = self._get_param("NameContains") or ""
    found = [
        c
        for c in components(self.current_account, self.region).values()
        if part in c.name and all(value in (None, getattr(c, key)) for key, value in wanted.items())
    ]
    found.sort(key=lambda c: c.created, reverse=True)
    return ActionResult({"InferenceComponents": [c.summary() for c in found]})


def answer_describe_and_list() -> None:
    """moto dispatches an action to the SageMaker response method of its snake_case name."""
    for handler in (describe_inference_component, list_inference_components):
        setattr(sagemaker_responses.SageMakerResponse, handler.__name__, handler)


# InvokeEndpoint's answer while a component has no copy ("Scale an endpoint to zero instances", SageMaker developer
# guide): a ValidationError, and a NoCapacityInvocationFailures datapoint that the scale-out alarm acts on.
NO_CAPACITY = (
    "Inference Component has no capacity to process this request. ApplicationAutoScaling may be in-progress (if "
    "configured) or try to increase the capacity by invoking UpdateInferenceComponentRuntimeConfig API."
)


class CopyCycle:
    """A component's copy count as its scaling moves it, in front of `serve` (the request body -> the answer's
    bytes): after `idle_s` without a request the idle alarm takes it to 0; a request at 0 is refused with
    NO_CAPACITY and the no-capacity alarm starts one copy, which serves `start_s` later (instance, image, load);
    `on_copy` runs as the count goes from 0 to 1 (the local pipeline starts its model server there)."""

    def __init__(self, component: Component, *, serve, idle_s: float, start_s: float, clock, on_copy=None) -> None:
        self.component, self.serve, self.idle_s, self.start_s, self.clock = component, serve, idle_s, start_s, clock
        self.on_copy = on_copy
        self.last_request = clock()
        self.ready_at: float | None = None

    def tick(self) -> None:
        now = self.clock()
        if self.ready_at is not None and now >= self.ready_at:
            self.ready_at = None
            if self.on_copy is not None:
                self.on_copy()
            scale(self.component, 1, "NoCapacityInvocationFailures alarm: a copy started")
            self.last_request = now
        if self.component.copy_count > 0 and now - self.last_request >= self.idle_s:
            scale(self.component, 0, f"idle alarm: no request for {self.idle_s:g} s")

    def invoke_endpoint(self, *, EndpointName, Body, ContentType, Accept="*/*", InferenceComponentName=None):  # noqa: N803 - boto3's names
        from botocore.exceptions import ClientError

        self.tick()
        if InferenceComponentName != self.component.name:
            message = "Inference Component Name header is required for endpoints to which you plan to deploy "
            raise ClientError({"Error": {"Code": "ValidationError", "Message": message}}, "InvokeEndpoint")
        self.last_request = self.clock()
        if self.component.copy_count == 0:
            if self.ready_at is None:
                self.ready_at = self.clock() + self.start_s
                self.component.log.append(f"{self.component.name}: request refused, no copy: starting one")
            raise ClientError({"Error": {"Code": "ValidationError", "Message": NO_CAPACITY}}, "InvokeEndpoint")
        import io

        return {"Body": io.BytesIO(self.serve(Body)), "ContentType": ContentType}
