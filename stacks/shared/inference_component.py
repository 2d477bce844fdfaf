"""An inference component on the endpoint's one variant, and the scaling that takes its copies to zero and back.

SageMaker scales an endpoint to zero instances only when it hosts inference components ("Scale an endpoint to
zero instances", SageMaker developer guide). The pieces, all on the component's copy count
(`sagemaker:inference-component:DesiredCopyCount`, registered at minimum 0):
- scale in to zero: a step policy (ExactCapacity 0) on an alarm that no request reached the component, neither
  served (Invocations) nor refused for want of a copy (NoCapacityInvocationFailures), for `idle_minutes`; the
  refused ones count, so a request at zero ends the idle spell and the next copy is not taken away at once;
- scale out from zero: a step policy (+1 copy) on an alarm over NoCapacityInvocationFailures, as the guide does;
- between one copy and the maximum: target tracking on SageMakerInferenceComponentInvocationsPerCopy, scale-out
  only, so only the idle alarm decides when the last copy goes. Target tracking could not reach zero anyway:
  "SageMaker doesn't emit metrics with a value of zero" (SageMaker developer guide, "Edit a scaling policy"), which
  is why the idle alarm treats missing data as breaching.
ManagedInstanceScaling on the variant then starts and stops instances for the copies.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass

import jsii
from aws_cdk import Duration
from aws_cdk import aws_applicationautoscaling as appscaling
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_sagemaker as sagemaker
from constructs import Construct

from ..config.endpoint import AutoscalingConfig, RolloutConfig
from .endpoint_specs import ContainerSpec, VariantSpec

COPY_COUNT = "sagemaker:inference-component:DesiredCopyCount"
MINUTE = 60


@dataclass(frozen=True)
class ComponentSpec:
    """One copy's compute requirements, how many copies an instance holds, and the idle time before zero."""

    accelerator_devices: int
    min_memory_mb: int
    copies_per_instance: int
    idle_minutes: int


NAME_LIMIT = 63  # botocore: InferenceComponentName, [a-zA-Z0-9](-*[a-zA-Z0-9])*, at most 63 characters


def component_name(path_name: str) -> str:
    """A fixed name (CloudFormation gives a component no readable name to Ref): `path_name`, the stack and
    construct path, in the name's alphabet, shortened with a hash where too long. Fixed, and no property of a
    component is create-only, so a promotion updates it in place."""
    name = re.sub(r"[^A-Za-z0-9]+", "-", path_name).strip("-")
    if len(name) <= NAME_LIMIT:
        return name
    digest = hashlib.sha256(name.encode()).hexdigest()[:8]
    return f"{name[: NAME_LIMIT - 9].rstrip('-')}-{digest}"


def max_instances(component: ComponentSpec, scaling: AutoscalingConfig) -> int:
    """The instances ManagedInstanceScaling may start: enough for the most copies autoscaling asks for."""
    return -(-scaling.max_capacity // component.copies_per_instance)


def host_component(
    config: sagemaker.CfnEndpointConfig,
    *,
    role_arn: str,
    container: ContainerSpec,
    variant: VariantSpec,
    variant_name: str,
    component: ComponentSpec,
    scaling: AutoscalingConfig,
) -> None:
    """Make `config` a component endpoint's: no model on the variant, instances managed between 0 and what the
    copies need, requests to the least busy copy, the role SageMaker starts copies with, the model's network."""
    config.execution_role_arn = role_arn
    if container.network_isolation:
        config.enable_network_isolation = True
    if container.vpc_subnet_ids:
        config.vpc_config = sagemaker.CfnEndpointConfig.VpcConfigProperty(
            subnets=list(container.vpc_subnet_ids), security_group_ids=list(container.vpc_security_group_ids)
        )
    config.production_variants = [
        sagemaker.CfnEndpointConfig.ProductionVariantProperty(
            variant_name=variant_name,
            instance_type=variant.instance_type,
            initial_instance_count=variant.initial_instance_count,
            volume_size_in_gb=variant.volume_size_gb,
            container_startup_health_check_timeout_in_seconds=variant.startup_health_check_timeout_seconds,
            model_data_download_timeout_in_seconds=variant.model_data_download_timeout_seconds,
            inference_ami_version=variant.inference_ami_version,
            managed_instance_scaling=sagemaker.CfnEndpointConfig.ManagedInstanceScalingProperty(
                status="ENABLED", min_instance_count=0, max_instance_count=max_instances(component, scaling)
            ),
            routing_config=sagemaker.CfnEndpointConfig.RoutingConfigProperty(
                routing_strategy="LEAST_OUTSTANDING_REQUESTS"
            ),
        )
    ]


def inference_component(
    scope: Construct,
    *,
    name: str,
    endpoint_name: str,
    variant_name: str,
    model_name: str,
    variant: VariantSpec,
    component: ComponentSpec,
    deployment: sagemaker.CfnInferenceComponent.InferenceComponentDeploymentConfigProperty,
) -> sagemaker.CfnInferenceComponent:
    """The served version as one component on the variant: its devices and memory, the start-up limits."""
    ic = sagemaker.CfnInferenceComponent
    return ic(
        scope,
        "Component",
        inference_component_name=name,
        endpoint_name=endpoint_name,
        variant_name=variant_name,
        specification=ic.InferenceComponentSpecificationProperty(
            model_name=model_name,
            compute_resource_requirements=ic.InferenceComponentComputeResourceRequirementsProperty(
                number_of_accelerator_devices_required=component.accelerator_devices,
                min_memory_required_in_mb=component.min_memory_mb,
            ),
            startup_parameters=ic.InferenceComponentStartupParametersProperty(
                container_startup_health_check_timeout_in_seconds=variant.startup_health_check_timeout_seconds,
                model_data_download_timeout_in_seconds=variant.model_data_download_timeout_seconds,
            ),
        ),
        runtime_config=ic.InferenceComponentRuntimeConfigProperty(copy_count=variant.initial_instance_count),
        deployment_config=deployment,
    )


def component_deployment(
    rollout: RolloutConfig, alarm_names: list[str]
) -> sagemaker.CfnInferenceComponent.InferenceComponentDeploymentConfigProperty:
    """UpdateInferenceComponent's DeploymentConfig (botocore: InferenceComponentDeploymentConfig, RollingUpdatePolicy
    required, AutoRollbackConfiguration optional): a promotion replaces copies in batches and rolls back on the
    endpoint's alarms. Components have no blue/green policy; serving.rollout's batch sizes and waits apply."""
    size = sagemaker.CfnInferenceComponent.InferenceComponentCapacitySizeProperty
    return sagemaker.CfnInferenceComponent.InferenceComponentDeploymentConfigProperty(
        rolling_update_policy=sagemaker.CfnInferenceComponent.InferenceComponentRollingUpdatePolicyProperty(
            maximum_batch_size=size(type="CAPACITY_PERCENT", value=rollout.maximum_batch_percent),
            rollback_maximum_batch_size=size(type="CAPACITY_PERCENT", value=rollout.rollback_maximum_batch_percent),
            wait_interval_in_seconds=rollout.wait_interval_seconds,
            maximum_execution_timeout_in_seconds=rollout.maximum_execution_timeout_seconds,
        ),
        auto_rollback_configuration=sagemaker.CfnInferenceComponent.AutoRollbackConfigurationProperty(
            alarms=[sagemaker.CfnInferenceComponent.AlarmProperty(alarm_name=name) for name in alarm_names]
        ),
    )


def invocations_tracking(
    scope: Construct,
    construct_id: str,
    *,
    name: str,
    target: appscaling.CfnScalableTarget,
    metric_type: str,
    scaling: AutoscalingConfig,
    scales_in: bool,
) -> appscaling.CfnScalingPolicy:
    """Target tracking on invocations per instance (a plain variant) or per copy (a component): the one policy both
    hostings scale out with; `scales_in` False where another policy scales in; named `<scope id>-<name>`."""
    return appscaling.CfnScalingPolicy(
        scope,
        construct_id,
        policy_name=f"{scope.node.id}-{name}",
        policy_type="TargetTrackingScaling",
        scaling_target_id=target.ref,
        target_tracking_scaling_policy_configuration=(
            appscaling.CfnScalingPolicy.TargetTrackingScalingPolicyConfigurationProperty(
                target_value=scaling.target_invocations_per_instance,
                predefined_metric_specification=appscaling.CfnScalingPolicy.PredefinedMetricSpecificationProperty(
                    predefined_metric_type=metric_type
                ),
                disable_scale_in=None if scales_in else True,
                scale_in_cooldown=scaling.scale_in_cooldown_seconds if scales_in else None,
                scale_out_cooldown=scaling.scale_out_cooldown_seconds,
            )
        ),
    )


def component_scaling(
    scope: Construct,
    *,
    component_name: str,
    component: ComponentSpec,
    scaling: AutoscalingConfig,
    metric: cloudwatch.Metric,
    failures: cloudwatch.Metric,
    alarm_name: str,
) -> appscaling.CfnScalableTarget:
    """The copy count's scalable target (minimum 0) and its three policies; `metric`/`failures`: the component's
    Invocations and NoCapacityInvocationFailures; `alarm_name` (a format string) names the two scaling alarms."""
    target = appscaling.CfnScalableTarget(
        scope,
        "ScalableTarget",
        service_namespace="sagemaker",
        resource_id=f"inference-component/{component_name}",
        scalable_dimension=COPY_COUNT,
        min_capacity=0,
        max_capacity=scaling.max_capacity,
    )
    invocations_tracking(
        scope,
        "InvocationsPerCopy",
        name="invocations-per-copy",
        target=target,
        metric_type="SageMakerInferenceComponentInvocationsPerCopy",
        scaling=scaling,
        scales_in=False,  # the idle alarm's step policy takes the count to zero
    )
    _scale_out_from_zero(scope, target=target, scaling=scaling, failures=failures, alarm_name=alarm_name)
    _scale_in_to_zero(
        scope,
        target=target,
        idle_minutes=component.idle_minutes,
        metric=metric,
        failures=failures,
        alarm_name=alarm_name,
    )
    return target


def _scale_out_from_zero(
    scope: Construct,
    *,
    target: appscaling.CfnScalableTarget,
    scaling: AutoscalingConfig,
    failures: cloudwatch.Metric,
    alarm_name: str,
) -> None:
    """One copy on the first refused request: with no copy there are no invocations for target tracking to
    scale on, only NoCapacityInvocationFailures."""
    _step_alarm(
        scope,
        "ScaleOutFromZero",
        target=target,
        adjustment=("ChangeInCapacity", 1),
        cooldown=scaling.scale_out_cooldown_seconds,
        alarm=cloudwatch.Alarm(
            scope,
            "NoCapacityAlarm",
            alarm_name=alarm_name.format("NoCapacityInvocationFailures"),
            alarm_description="a request found no copy: start one (scale out from zero)",
            metric=failures.with_(statistic="Maximum", period=Duration.seconds(MINUTE)),
            threshold=1,
            comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
            evaluation_periods=1,
            datapoints_to_alarm=1,
            treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,
        ),
    )


def _scale_in_to_zero(
    scope: Construct,
    *,
    target: appscaling.CfnScalableTarget,
    idle_minutes: int,
    metric: cloudwatch.Metric,
    failures: cloudwatch.Metric,
    alarm_name: str,
) -> None:
    """No copy after `idle_minutes` without a request, served or refused: target tracking never scales below one
    copy, so the last one stops on this alarm (missing data counts as idle)."""
    requests = cloudwatch.MathExpression(
        expression="FILL(invocations, 0) + FILL(failures, 0)",
        using_metrics={"invocations": metric, "failures": failures},
        label="requests (served or refused for want of a copy)",
        period=Duration.seconds(MINUTE),
    )
    _step_alarm(
        scope,
        "ScaleInToZero",
        target=target,
        adjustment=("ExactCapacity", 0),
        cooldown=MINUTE,
        alarm=cloudwatch.Alarm(
            scope,
            "IdleAlarm",
            alarm_name=alarm_name.format("Idle"),
            alarm_description=f"no request for {idle_minutes} minutes: stop the last copy",
            metric=requests,
            threshold=1,
            comparison_operator=cloudwatch.ComparisonOperator.LESS_THAN_THRESHOLD,
            evaluation_periods=idle_minutes,
            datapoints_to_alarm=idle_minutes,
            treat_missing_data=cloudwatch.TreatMissingData.BREACHING,
        ),
    )


def _step_alarm(
    scope: Construct,
    construct_id: str,
    *,
    target: appscaling.CfnScalableTarget,
    adjustment: tuple[str, int],
    cooldown: int,
    alarm: cloudwatch.Alarm,
) -> None:
    """A step scaling policy that `alarm` runs while it is in ALARM (one step, whatever the breach)."""
    kind, value = adjustment
    step = appscaling.CfnScalingPolicy.StepAdjustmentProperty
    scale_out = value > 0 and kind == "ChangeInCapacity"
    policy = appscaling.CfnScalingPolicy(
        scope,
        construct_id,
        policy_name=f"{scope.node.id}-{construct_id}",
        policy_type="StepScaling",
        scaling_target_id=target.ref,
        step_scaling_policy_configuration=appscaling.CfnScalingPolicy.StepScalingPolicyConfigurationProperty(
            adjustment_type=kind,
            cooldown=cooldown,
            metric_aggregation_type="Maximum" if scale_out else "Minimum",
            step_adjustments=[
                step(metric_interval_lower_bound=0, scaling_adjustment=value)
                if scale_out
                else step(metric_interval_upper_bound=0, scaling_adjustment=value)
            ],
        ),
    )
    alarm.add_alarm_action(_PolicyAction(policy.attr_arn))


@jsii.implements(cloudwatch.IAlarmAction)
class _PolicyAction:
    """An alarm action that runs an Application Auto Scaling policy by its ARN (IAlarmAction)."""

    def __init__(self, arn: str) -> None:
        self._arn = arn

    def bind(self, _scope: Construct, _alarm: cloudwatch.IAlarm) -> cloudwatch.AlarmActionConfig:
        return cloudwatch.AlarmActionConfig(alarm_action_arn=self._arn)
