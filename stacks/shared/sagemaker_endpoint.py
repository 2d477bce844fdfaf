"""A SageMaker real-time endpoint that is safe to update: any container, one variant, guarded rollouts.

Model, EndpointConfig and Endpoint carry no fixed names, so a changed model or config is a
replacement CloudFormation can do; the Endpoint itself is updated in place (UpdateEndpoint) with a
rolling or blue/green deployment that rolls back on the endpoint's alarms, and keeps the instance
count autoscaling chose (RetainAllVariantProperties). Container-specific parts live in subclasses'
callers (e.g. LmiNeuronxEndpoint).
"""

from __future__ import annotations

from collections.abc import Sequence

from aws_cdk import Duration, Stack, Tags
from aws_cdk import aws_applicationautoscaling as appscaling
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_cloudwatch_actions as cw_actions
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_sagemaker as sagemaker
from aws_cdk import aws_sns as sns
from constructs import Construct, IDependable

from ..config.endpoint import AlarmConfig, AutoscalingConfig, DataCaptureConfig, RolloutConfig
from .endpoint_dashboard import INSTANCE_NAMESPACE, endpoint_dashboard
from .endpoint_specs import ContainerSpec, VariantSpec, mounted_model_source
from .inference_component import (
    ComponentSpec,
    component_deployment,
    component_name,
    component_scaling,
    host_component,
    inference_component,
    invocations_tracking,
)

VARIANT_NAME = "AllTraffic"  # constant: rolling and blue/green updates require the same variant name
SAGEMAKER_NAMESPACE = "AWS/SageMaker"
ENDPOINT_LOG_GROUPS = "/aws/sagemaker/Endpoints/"
ROLLBACK_ALARMS = ("ModelLatencyP90", "Invocation5XXErrors", "Invocation4XXErrorRate")


class SageMakerEndpoint(Construct):
    """CfnModel + CfnEndpointConfig + CfnEndpoint, autoscaling, alarms (to `alarm_topic`) and a dashboard."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        container: ContainerSpec,
        variant: VariantSpec,
        execution_role: iam.IRole,
        role_policies: Sequence[IDependable],
        revision: str,
        kms_key: kms.IKey,
        rollout: RolloutConfig,
        autoscaling: AutoscalingConfig,
        alarms: AlarmConfig,
        alarm_topic: sns.ITopic,
        data_capture: DataCaptureConfig,
        data_capture_destination: str | None,
        component: ComponentSpec | None = None,
    ) -> None:
        """`revision` fingerprints what defines the model (weights, image, settings). `component`: host the model
        as an inference component that scales to zero (stacks/shared/inference_component.py), not on the variant."""
        super().__init__(scope, construct_id)
        self._alarms_config = alarms
        self.model = self._model(container, execution_role=execution_role, role_policies=role_policies)
        self.endpoint_config = self._endpoint_config(
            variant, kms_key=kms_key, data_capture=data_capture, data_capture_destination=data_capture_destination
        )
        self.alarm_names = {name: self._alarm_name(name) for name in ROLLBACK_ALARMS}
        self.endpoint = sagemaker.CfnEndpoint(
            self,
            "Endpoint",
            endpoint_config_name=self.endpoint_config.attr_endpoint_config_name,
            retain_all_variant_properties=True,
            # With a component, promotions update the component (its own rolling policy), not the endpoint.
            deployment_config=None if component else self._deployment_config(rollout),
        )
        self.endpoint_name = self.endpoint.attr_endpoint_name
        self.variant_name = VARIANT_NAME
        self.component = None
        self.component_name = component_name(self._alarm_name("Component"))
        if component is not None:
            self.component = self._host_component(
                container, variant, component, autoscaling=autoscaling, rollout=rollout, role_policies=role_policies
            )
        # As a tag, `revision` makes the replacement chain Model -> EndpointConfig -> Endpoint (or Model ->
        # Component) visible in every template diff (and to emulators that only update resources whose template
        # changed).
        for resource in (self.endpoint_config, self.endpoint) if self.component is None else (self.component,):
            Tags.of(resource).add("model-revision", revision)

        self.scalable_target = (
            self._autoscaling(autoscaling) if component is None else self._scale_to_zero(component, autoscaling)
        )
        self.alarms = self._create_alarms(alarms, alarm_topic, variant.instance_vcpus)
        self.dashboard = endpoint_dashboard(
            self, metric=self.metric, alarm_names={name: self._alarm_name(name) for name in self.alarms}
        )

    def _host_component(
        self,
        container: ContainerSpec,
        variant: VariantSpec,
        component: ComponentSpec,
        *,
        autoscaling: AutoscalingConfig,
        rollout: RolloutConfig,
        role_policies: Sequence[IDependable],
    ) -> sagemaker.CfnInferenceComponent:
        """The model as an inference component on a variant without one: the variant keeps the instances, the
        component the copies; the config's execution role must hold its policies before SageMaker uses it."""
        host_component(
            self.endpoint_config,
            role_arn=self.model.execution_role_arn,
            container=container,
            variant=variant,
            variant_name=VARIANT_NAME,
            component=component,
            scaling=autoscaling,
        )
        built = inference_component(
            self,
            name=self.component_name,
            endpoint_name=self.endpoint_name,
            variant_name=VARIANT_NAME,
            model_name=self.model.attr_model_name,
            variant=variant,
            component=component,
            deployment=component_deployment(rollout, list(self.alarm_names.values())),
        )
        for policy in role_policies:
            self.endpoint_config.node.add_dependency(policy)
        return built

    def _model(
        self, container: ContainerSpec, *, execution_role: iam.IRole, role_policies: Sequence[IDependable]
    ) -> sagemaker.CfnModel:
        """The container; created after the role's policies, since CreateModel checks the role can pull the image."""
        model = sagemaker.CfnModel(
            self,
            "Model",
            execution_role_arn=execution_role.role_arn,
            primary_container=sagemaker.CfnModel.ContainerDefinitionProperty(
                image=container.image_uri,
                model_data_url=container.model_data_url,
                model_data_source=mounted_model_source(container.model_data_source_uri),
                environment=dict(sorted(container.environment.items())),
            ),
            enable_network_isolation=container.network_isolation or None,
            vpc_config=sagemaker.CfnModel.VpcConfigProperty(
                subnets=list(container.vpc_subnet_ids), security_group_ids=list(container.vpc_security_group_ids)
            )
            if container.vpc_subnet_ids
            else None,
        )
        for policy in role_policies:
            model.node.add_dependency(policy)
        return model

    def _endpoint_config(
        self,
        variant: VariantSpec,
        *,
        kms_key: kms.IKey,
        data_capture: DataCaptureConfig,
        data_capture_destination: str | None,
    ) -> sagemaker.CfnEndpointConfig:
        """One constant variant (`AllTraffic`) of the model, its volume encrypted with the data key."""
        return sagemaker.CfnEndpointConfig(
            self,
            "EndpointConfig",
            kms_key_id=kms_key.key_arn,
            production_variants=[
                sagemaker.CfnEndpointConfig.ProductionVariantProperty(
                    variant_name=VARIANT_NAME,
                    model_name=self.model.attr_model_name,
                    instance_type=variant.instance_type,
                    initial_instance_count=variant.initial_instance_count,
                    initial_variant_weight=1,
                    volume_size_in_gb=variant.volume_size_gb,
                    container_startup_health_check_timeout_in_seconds=variant.startup_health_check_timeout_seconds,
                    model_data_download_timeout_in_seconds=variant.model_data_download_timeout_seconds,
                    inference_ami_version=variant.inference_ami_version,
                )
            ],
            data_capture_config=self._data_capture(data_capture, data_capture_destination, kms_key),
        )

    def _scale_to_zero(self, component: ComponentSpec, scaling: AutoscalingConfig) -> appscaling.CfnScalableTarget:
        target = component_scaling(
            self,
            component_name=self.component_name,
            component=component,
            scaling=scaling,
            metric=self.metric("Invocations"),
            failures=self.metric("NoCapacityInvocationFailures"),
            alarm_name=self._alarm_name("{}"),
        )
        target.add_dependency(self.component)  # the target names the component; CloudFormation cannot see it
        return target

    # -- update safety ------------------------------------------------------------------------------
    def _alarm_name(self, metric: str) -> str:
        # Derived from the stack name, not Ref'd: the alarms watch the endpoint (by its generated
        # name) and the endpoint's rollback config names the alarms; a Ref would be a cycle.
        stack = Stack.of(self)
        inside = "-".join(c.node.id for c in self.node.scopes[len(stack.node.scopes) :])
        return f"{stack.stack_name}-{inside}-{metric}"

    def _deployment_config(self, rollout: RolloutConfig) -> sagemaker.CfnEndpoint.DeploymentConfigProperty:
        rollback = sagemaker.CfnEndpoint.AutoRollbackConfigProperty(
            alarms=[sagemaker.CfnEndpoint.AlarmProperty(alarm_name=n) for n in self.alarm_names.values()]
        )
        percent = sagemaker.CfnEndpoint.CapacitySizeProperty
        if rollout.strategy == "rolling":
            return sagemaker.CfnEndpoint.DeploymentConfigProperty(
                auto_rollback_configuration=rollback,
                rolling_update_policy=sagemaker.CfnEndpoint.RollingUpdatePolicyProperty(
                    maximum_batch_size=percent(type="CAPACITY_PERCENT", value=rollout.maximum_batch_percent),
                    rollback_maximum_batch_size=percent(
                        type="CAPACITY_PERCENT", value=rollout.rollback_maximum_batch_percent
                    ),
                    wait_interval_in_seconds=rollout.wait_interval_seconds,
                    maximum_execution_timeout_in_seconds=rollout.maximum_execution_timeout_seconds,
                ),
            )
        canary = rollout.traffic == "canary"
        return sagemaker.CfnEndpoint.DeploymentConfigProperty(
            auto_rollback_configuration=rollback,
            blue_green_update_policy=sagemaker.CfnEndpoint.BlueGreenUpdatePolicyProperty(
                traffic_routing_configuration=sagemaker.CfnEndpoint.TrafficRoutingConfigProperty(
                    type="CANARY" if canary else "ALL_AT_ONCE",
                    canary_size=percent(type="CAPACITY_PERCENT", value=rollout.canary_percent) if canary else None,
                    wait_interval_in_seconds=rollout.wait_interval_seconds,
                ),
                termination_wait_in_seconds=rollout.termination_wait_seconds,
                maximum_execution_timeout_in_seconds=rollout.maximum_execution_timeout_seconds,
            ),
        )

    @staticmethod
    def _data_capture(
        capture: DataCaptureConfig, destination: str | None, key: kms.IKey
    ) -> sagemaker.CfnEndpointConfig.DataCaptureConfigProperty | None:
        if not capture.enabled or destination is None:
            return None
        option = sagemaker.CfnEndpointConfig.CaptureOptionProperty
        return sagemaker.CfnEndpointConfig.DataCaptureConfigProperty(
            enable_capture=True,
            initial_sampling_percentage=capture.sampling_percent,
            destination_s3_uri=destination,
            kms_key_id=key.key_arn,
            capture_options=[option(capture_mode="Input"), option(capture_mode="Output")],
            capture_content_type_header=sagemaker.CfnEndpointConfig.CaptureContentTypeHeaderProperty(
                json_content_types=["application/json"]
            ),
        )

    # -- scaling ------------------------------------------------------------------------------------
    def _autoscaling(self, scaling: AutoscalingConfig) -> appscaling.CfnScalableTarget:
        # L1 on purpose: without RoleARN Application Auto Scaling uses its SageMaker service-linked role,
        # where the L2 would create (and nag would review) an extra IAM role.
        target = appscaling.CfnScalableTarget(
            self,
            "ScalableTarget",
            service_namespace="sagemaker",
            resource_id=f"endpoint/{self.endpoint_name}/variant/{VARIANT_NAME}",
            scalable_dimension="sagemaker:variant:DesiredInstanceCount",
            min_capacity=scaling.min_capacity,
            max_capacity=scaling.max_capacity,
        )
        invocations_tracking(
            self,
            "InvocationsPerInstance",
            name="invocations-per-instance",
            target=target,
            metric_type="SageMakerVariantInvocationsPerInstance",
            scaling=scaling,
            scales_in=True,
        )
        return target

    # -- observability ------------------------------------------------------------------------------
    def metric(self, name: str, *, statistic: str = "Sum", namespace: str = SAGEMAKER_NAMESPACE) -> cloudwatch.Metric:
        return cloudwatch.Metric(
            namespace=namespace,
            metric_name=name,
            dimensions_map=self._dimensions(namespace),
            statistic=statistic,
            period=Duration.seconds(self._alarms_config.period_seconds),
        )

    def _dimensions(self, namespace: str) -> dict[str, str]:
        """A component's invocation metrics are per InferenceComponentName; the instances' stay per variant."""
        if self.component is not None and namespace == SAGEMAKER_NAMESPACE:
            return {"InferenceComponentName": self.component_name}
        return {"EndpointName": self.endpoint_name, "VariantName": VARIANT_NAME}

    def _create_alarms(self, cfg: AlarmConfig, topic: sns.ITopic, vcpus: int) -> dict[str, cloudwatch.Alarm]:
        error_rate = cloudwatch.MathExpression(
            expression="IF(invocations > 0, 100 * errors / invocations, 0)",
            using_metrics={"errors": self.metric("Invocation4XXErrors"), "invocations": self.metric("Invocations")},
            label="4XX error rate (%)",
            period=Duration.seconds(cfg.period_seconds),
        )
        specs: dict[str, tuple[cloudwatch.IMetric, float, str]] = {
            "ModelLatencyP90": (
                self.metric("ModelLatency", statistic="p90"),
                cfg.model_latency_p90_ms * 1000,
                f"ModelLatency p90 above {cfg.model_latency_p90_ms} ms",
            ),
            "Invocation5XXErrors": (
                self.metric("Invocation5XXErrors"),
                cfg.invocation_5xx_errors,
                f"at least {cfg.invocation_5xx_errors} 5XX errors per period",
            ),
            "Invocation4XXErrorRate": (
                error_rate,
                cfg.invocation_4xx_rate_percent,
                f"4XX errors above {cfg.invocation_4xx_rate_percent}%",
            ),
            "CPUUtilization": (
                self.metric("CPUUtilization", statistic="Average", namespace=INSTANCE_NAMESPACE),
                cfg.cpu_percent * vcpus,
                f"CPU above {cfg.cpu_percent}% of {vcpus} vCPUs",
            ),
            "MemoryUtilization": (
                self.metric("MemoryUtilization", statistic="Average", namespace=INSTANCE_NAMESPACE),
                cfg.memory_percent,
                f"memory above {cfg.memory_percent}%",
            ),
        }
        action = cw_actions.SnsAction(topic)
        created = {}
        for name, (metric, threshold, what) in specs.items():
            comparison = (
                cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD
                if name == "Invocation5XXErrors"
                else cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD
            )
            alarm = cloudwatch.Alarm(
                self,
                f"{name}Alarm",
                alarm_name=self._alarm_name(name),
                alarm_description=f"{what}{' (rolls back endpoint updates)' if name in ROLLBACK_ALARMS else ''}",
                metric=metric,
                threshold=threshold,
                comparison_operator=comparison,
                evaluation_periods=cfg.evaluation_periods,
                datapoints_to_alarm=cfg.datapoints_to_alarm,
                treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,
            )
            alarm.add_alarm_action(action)
            alarm.add_ok_action(action)
            created[name] = alarm
        return created


def allow_alarm_notifications(key: kms.IKey) -> None:
    """CloudWatch publishes alarm notifications to topics encrypted with `key` (stacks that each add this get
    identical statements, which the key policy merges)."""
    key.add_to_resource_policy(
        iam.PolicyStatement(
            sid="AllowCloudWatchAlarmsToEncryptedTopics",
            principals=[iam.ServicePrincipal("cloudwatch.amazonaws.com")],
            actions=["kms:Decrypt", "kms:GenerateDataKey*"],
            resources=["*"],
        )
    )
