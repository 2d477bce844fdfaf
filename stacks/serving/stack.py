"""The serving layer: the pinned model on ml.inf2 behind its backend's container, scaled, alarmed, on a dashboard.

Every permission of the endpoint's execution role is written here, scoped to what it reads: the
pinned model (and compiled graph) prefixes, the model tarball, the data key, the endpoint log
groups and the one image repository.
"""

from __future__ import annotations

from aws_cdk import Aws, CfnOutput, Stack
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_sns as sns
from aws_cdk import aws_sns_subscriptions as subscriptions
from constructs import Construct

from ..config.serving import ServingConfig
from ..shared.acknowledgments import Wildcard, acknowledge_wildcards
from ..shared.container_images import ContainerImages
from ..shared.endpoint_runtime import endpoint_runtime_statements, endpoint_runtime_wildcards
from ..shared.environment import EnvironmentFacts
from ..shared.job_role import vpc_statements, vpc_wildcards
from ..shared.placement import Placement
from ..shared.sagemaker_endpoint import allow_alarm_notifications
from .hosting import EndpointProps


class ServingStack(Stack):
    """The backend's endpoint construct (stacks/serving/backends/<backend>/endpoint.py), its execution role and
    alarm topic; reads the Data stack."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        serving: ServingConfig,
        environment: EnvironmentFacts,
        bucket: s3.IBucket,
        key: kms.IKey,
        placement: Placement | None = None,
        **kwargs,
    ) -> None:
        """`placement`: isolated mode: the model runs network-isolated in these subnets, weights mounted from S3."""
        super().__init__(scope, construct_id, **kwargs)
        if serving.model_prefix is None:
            raise ValueError("ServingStack needs a serving section with a model_prefix (build_app skips it without)")
        images = ContainerImages(self, "Images", names=[serving.image_name])
        if not serving.image_uri:  # a pinned image_uri does not come from the image map
            images.require_region(environment)
        role = iam.Role(
            self,
            "ExecutionRole",
            assumed_by=iam.ServicePrincipal("sagemaker.amazonaws.com"),
            description=f"{environment.name}: {serving.backend_label} endpoint execution role",
        )
        # A managed (not inline) policy: HIPAA/NIST reject inline policies; the model waits for it.
        policy = iam.ManagedPolicy(
            self, "ExecutionPolicy", roles=[role], description="Read the pinned model, pull the image, write logs"
        )
        self.topic = self._alarm_topic(serving, name=environment.name, key=key)
        capture_prefix = (
            f"{serving.data_capture.prefix}{environment.env_name}/" if serving.data_capture.enabled else None
        )
        capture_uri = bucket.s3_url_for_object(capture_prefix) if capture_prefix else None
        graph = serving.compiled_graph_prefix
        props = EndpointProps(
            serving=serving,
            image_uri=images.uri(serving.image_name, serving.image_uri),
            model_uri=bucket.s3_url_for_object(serving.model_prefix),
            compiled_graph_uri=bucket.s3_url_for_object(graph) if graph else None,
            execution_role=role,
            role_policies=[policy],
            kms_key=key,
            alarm_topic=self.topic,
            data_capture_destination=capture_uri,
            isolated_placement=placement,
        )
        self.endpoint = serving.spec.endpoint()(self, "Llm", props=props)
        statements = self._execution_statements(
            serving, bucket=bucket, key=key, images=images, capture_prefix=capture_prefix, placement=placement
        )
        policy.add_statements(*statements)
        acknowledge_wildcards(policy, self._execution_wildcards(serving, bucket, capture_prefix, placement))
        self._outputs(serving)

    def _execution_wildcards(
        self, serving: ServingConfig, bucket: s3.IBucket, capture_prefix: str | None, placement: Placement | None
    ) -> list[Wildcard]:
        """Why the execution statements reach every object under the pinned prefixes (cdk-nag's IAM5)."""
        reasons = {
            serving.model_prefix: "The LMI container downloads every file of the merged model under the pinned "
            "prefix (serving.model_prefix); read only, nothing else in the bucket.",
            serving.compiled_graph_prefix: "Precompiled Neuron artifacts under the pinned "
            "serving.compiled_graph_prefix; read only.",
            capture_prefix: "Data capture writes request/response samples under this environment's capture prefix "
            "only (s3:PutObject).",
        }
        return [
            *(Wildcard(bucket.arn_for_objects(f"{p}*"), reason) for p, reason in reasons.items() if p),
            *endpoint_runtime_wildcards(self, vpc=placement is not None),
            *(vpc_wildcards(self) if placement is not None else []),
        ]

    def _alarm_topic(self, serving: ServingConfig, *, name: str, key: kms.IKey) -> sns.Topic:
        """Encrypted with the data key, which lets CloudWatch alarms publish; optional e-mail subscription."""
        topic = sns.Topic(
            self,
            "AlarmTopic",
            display_name=f"{name} serving alarms",
            master_key=key,
            enforce_ssl=True,
        )
        if serving.alarms.email:
            topic.add_subscription(subscriptions.EmailSubscription(serving.alarms.email))
        allow_alarm_notifications(key)
        return topic

    def _execution_statements(
        self,
        serving: ServingConfig,
        *,
        bucket: s3.IBucket,
        key: kms.IKey,
        images: ContainerImages,
        capture_prefix: str | None,
        placement: Placement | None,
    ) -> list[iam.PolicyStatement]:
        """Scoped to what the endpoint reads: the pinned prefixes, the model tarball, the data key, one image."""
        read_prefixes = [p for p in (serving.model_prefix, serving.compiled_graph_prefix) if p]
        statements = [
            iam.PolicyStatement(
                sid="ListPinnedModelPrefixes",
                actions=["s3:ListBucket"],
                resources=[bucket.bucket_arn],
                conditions={"StringLike": {"s3:prefix": [f"{p}*" for p in read_prefixes]}},
            ),
            iam.PolicyStatement(
                sid="ReadPinnedModel",
                actions=["s3:GetObject"],
                resources=[bucket.arn_for_objects(f"{p}*") for p in read_prefixes],
            ),
            iam.PolicyStatement(
                sid="DecryptWithDataKey",
                actions=["kms:Decrypt", "kms:DescribeKey"]
                + (["kms:GenerateDataKey", "kms:Encrypt"] if capture_prefix else []),
                resources=[key.key_arn],
            ),
            iam.PolicyStatement(
                sid="PullServingImage",
                actions=["ecr:BatchCheckLayerAvailability", "ecr:BatchGetImage", "ecr:GetDownloadUrlForLayer"],
                resources=[images.repository_arn(serving.image_name, serving.image_uri)],
            ),
            *endpoint_runtime_statements(self),
        ]
        asset = self.endpoint.model_asset
        if asset is not None:
            statements.append(
                iam.PolicyStatement(
                    sid="ReadModelTarball",
                    actions=["s3:GetObject"],
                    resources=[asset.bucket.arn_for_objects(asset.s3_object_key)],
                )
            )
        if placement is not None:
            statements += vpc_statements(self, placement)
        if capture_prefix:
            statements.append(
                iam.PolicyStatement(
                    sid="WriteDataCapture",
                    actions=["s3:PutObject"],
                    resources=[bucket.arn_for_objects(f"{capture_prefix}*")],
                )
            )
        return statements

    def _outputs(self, serving: ServingConfig) -> None:
        hosting = self.endpoint.hosting
        CfnOutput(self, "EndpointName", value=hosting.endpoint_name, description="invoke with tools/invoke.py")
        CfnOutput(self, "EndpointConfigName", value=hosting.endpoint_config.attr_endpoint_config_name)
        CfnOutput(self, "ModelName", value=hosting.model.attr_model_name)
        if hosting.component is not None:  # a component endpoint answers only requests that name the component
            CfnOutput(
                self,
                "InferenceComponentName",
                value=hosting.component_name,
                description="tools/invoke.py sends it as InferenceComponentName",
            )
        CfnOutput(self, "ModelPrefix", value=serving.model_prefix, description="pinned in config; OPTION_MODEL_ID")
        CfnOutput(self, "DashboardName", value=hosting.dashboard.dashboard_name)
        CfnOutput(
            self,
            "DashboardUrl",
            value=f"https://console.aws.amazon.com/cloudwatch/home?region={Aws.REGION}#dashboards:name="
            + hosting.dashboard.dashboard_name,
        )
        CfnOutput(self, "AlarmTopicArn", value=self.topic.topic_arn)
