"""The workload of synthesized templates: endpoints with their scaling range, interface endpoints, job states."""

from __future__ import annotations

import json

from tools.cost.cfn import as_int, ref_target, resources
from tools.cost.jobs import jobs_of
from tools.cost.model import Endpoint, InterfaceEndpoints, Job, Workload


def _scalable_targets(template: dict) -> list[dict]:
    """Properties of every scalable target on a variant's instance count."""
    return [
        res.get("Properties", {})
        for _, res in sorted(resources(template).items())
        if res.get("Type") == "AWS::ApplicationAutoScaling::ScalableTarget"
        and res.get("Properties", {}).get("ScalableDimension") == "sagemaker:variant:DesiredInstanceCount"
    ]


def _scale(endpoint_id: str, variant: dict, variants: list, targets: list[dict]) -> tuple[int, int]:
    """(min, max) instances of a variant: its scalable target's capacities, else its initial count.
    A target's ResourceId names the endpoint's generated name; a lone variant with a lone target is that one."""
    initial = as_int(variant.get("InitialInstanceCount"), 1)
    name = variant.get("VariantName", "AllTraffic")
    for props in targets:
        resource_id = json.dumps(props.get("ResourceId"), sort_keys=True)
        if (f'"{endpoint_id}"' in resource_id or len(variants) == 1 and len(targets) == 1) and (
            not isinstance(name, str) or name in resource_id or len(variants) == 1
        ):
            return as_int(props.get("MinCapacity"), initial), as_int(props.get("MaxCapacity"), initial)
    return initial, initial


def _endpoints_of(stack: str, template: dict) -> list[Endpoint]:
    """Each variant of each endpoint's config (by its Ref), with its scaling range: a variant whose managed instance
    scaling goes down to zero (an inference-component endpoint) from 0 to its MaxInstanceCount."""
    targets = _scalable_targets(template)
    endpoints = []
    for lid, res in sorted(resources(template).items()):
        if res.get("Type") != "AWS::SageMaker::Endpoint":
            continue
        config_id = ref_target(res.get("Properties", {}).get("EndpointConfigName"))
        config = resources(template).get(config_id or "", {}).get("Properties", {})
        variants = [v for v in config.get("ProductionVariants", []) if isinstance(v.get("InstanceType"), str)]
        for variant in variants:
            low, high = _scale(lid, variant, variants, targets)
            managed = variant.get("ManagedInstanceScaling", {})
            to_zero = managed.get("Status") == "ENABLED" and as_int(managed.get("MinInstanceCount"), 1) == 0
            if to_zero:  # a component endpoint: SageMaker starts instances for the copies, none while idle
                low, high = 0, as_int(managed.get("MaxInstanceCount"), high)
            name = variant.get("VariantName", "AllTraffic")
            label = f"{stack}/{lid}" + (f"/{name}" if len(variants) > 1 else "")
            endpoints.append(Endpoint(label, variant["InstanceType"], low, high, scales_to_zero=to_zero))
    return endpoints


def _interface_endpoints_of(stack: str, template: dict) -> list[InterfaceEndpoints]:
    """Interface VPC endpoints and their ENIs (one per subnet, i.e. per AZ); gateway endpoints are free."""
    interface = [
        res.get("Properties", {})
        for res in resources(template).values()
        if res.get("Type") == "AWS::EC2::VPCEndpoint"
        and res.get("Properties", {}).get("VpcEndpointType") == "Interface"
    ]
    if not interface:
        return []
    enis = sum(len(p["SubnetIds"]) if isinstance(p.get("SubnetIds"), list) else 1 for p in interface)
    return [InterfaceEndpoints(stack, len(interface), enis)]


def workload_from_templates(templates: dict[str, dict], region: str | None = None) -> Workload:
    """Endpoints (EndpointConfig variants + their scalable targets), interface VPC endpoints, and every job state."""
    endpoints: list[Endpoint] = []
    jobs: list[Job] = []
    vpces: list[InterfaceEndpoints] = []
    for stack in sorted(templates):
        endpoints += _endpoints_of(stack, templates[stack])
        jobs += jobs_of(stack, templates[stack])
        vpces += _interface_endpoints_of(stack, templates[stack])
    return Workload(region, tuple(endpoints), tuple(jobs), tuple(vpces))
