"""What an endpoint update means for clients: its rollout, and the one update SageMaker refuses."""

from __future__ import annotations

import json
from typing import Any


def ref_target(value: Any) -> str | None:
    """The logical id a Ref or Fn::GetAtt points at; None for anything else."""
    if isinstance(value, dict):
        if "Ref" in value:
            return value["Ref"]
        att = value.get("Fn::GetAtt")
        if att:
            return att[0] if isinstance(att, list) else str(att).split(".")[0]
    return None


def rollout(endpoint: dict) -> str:
    """How SageMaker moves the endpoint onto a new config, and whether alarms roll it back."""
    deploy = endpoint.get("Properties", {}).get("DeploymentConfig") or {}
    alarms = (deploy.get("AutoRollbackConfiguration") or {}).get("Alarms") or []
    rollback = f", rolled back on {len(alarms)} alarm(s)" if alarms else ", no automatic rollback"
    return _strategy(deploy) + rollback


def _strategy(deploy: dict) -> str:
    rolling = deploy.get("RollingUpdatePolicy")
    if rolling:
        return _rolling(rolling)
    blue_green = deploy.get("BlueGreenUpdatePolicy")
    if blue_green:
        routing = (blue_green.get("TrafficRoutingConfiguration") or {}).get("Type", "ALL_AT_ONCE")
        return f"blue/green deployment, traffic shifted {routing.lower().replace('_', ' ')}"
    return "blue/green deployment, all at once (SageMaker's default)"


def _rolling(rolling: dict) -> str:
    batch = rolling.get("MaximumBatchSize", {})
    size = (
        f"{batch.get('Value')}% of capacity"
        if batch.get("Type") == "CAPACITY_PERCENT"
        else f"{batch.get('Value')} instance(s)"
    )
    return f"rolling deployment, batches of {size}, {rolling.get('WaitIntervalInSeconds')} s apart"


def endpoints_using(template: dict, config_id: str) -> list[tuple[str, dict]]:
    """(logical id, resource) of every endpoint in `template` that runs the endpoint config `config_id`."""
    return sorted(
        (lid, res)
        for lid, res in template.get("Resources", {}).items()
        if res.get("Type") == "AWS::SageMaker::Endpoint"
        and ref_target(res.get("Properties", {}).get("EndpointConfigName")) == config_id
    )


def _variant_types(template: dict, endpoint_id: str) -> dict[str, Any]:
    """{variant name: instance type} of the config the endpoint `endpoint_id` points at in `template`."""
    resources = template.get("Resources", {})
    config_id = ref_target(resources.get(endpoint_id, {}).get("Properties", {}).get("EndpointConfigName"))
    variants = resources.get(config_id or "", {}).get("Properties", {}).get("ProductionVariants") or []
    return {str(v.get("VariantName")): v.get("InstanceType") for v in variants}


def _scalable_targets(template: dict, endpoint_id: str) -> list[str]:
    """Scalable targets on the variants of `endpoint_id` (their ResourceId names the endpoint's generated name)."""
    return sorted(
        lid
        for lid, res in template.get("Resources", {}).items()
        if res.get("Type") == "AWS::ApplicationAutoScaling::ScalableTarget"
        and res.get("Properties", {}).get("ScalableDimension") == "sagemaker:variant:DesiredInstanceCount"
        and f'"{endpoint_id}"' in json.dumps(res.get("Properties", {}).get("ResourceId"))
    )


def autoscaled_type_changes(base_template: dict, head_template: dict, endpoint_id: str) -> list[str]:
    """Why the update of an endpoint kept by name fails: a variant changes instance type while it is autoscaled.

    SageMaker refuses UpdateEndpoint when it changes the instance type of a variant registered as a
    scalable target ("Update endpoints that use auto scaling", SageMaker developer guide); the CloudFormation
    update fails and rolls back. The registration deployed is the base's."""
    targets = _scalable_targets(base_template, endpoint_id)
    if not targets or endpoint_id not in head_template.get("Resources", {}):
        return []
    before, after = _variant_types(base_template, endpoint_id), _variant_types(head_template, endpoint_id)
    return [
        f"endpoint `{endpoint_id}` variant {variant}: instance type {before[variant]} -> {after[variant]} while "
        f"scalable target `{', '.join(targets)}` is registered: SageMaker refuses that UpdateEndpoint and the "
        "stack update fails and rolls back. Deploy once with autoscaling off (or deregister the scalable target: "
        "aws application-autoscaling deregister-scalable-target --service-namespace sagemaker "
        "--scalable-dimension sagemaker:variant:DesiredInstanceCount --resource-id "
        f"endpoint/<name>/variant/{variant}), then deploy the new type"
        for variant in sorted(set(before) & set(after))
        if before[variant] != after[variant]
    ]
