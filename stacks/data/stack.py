"""The stateful data layer: the KMS key, the artifact bucket every other stack reads and writes, and the model
registry's package group the Training workflow registers every run in."""

from __future__ import annotations

from aws_cdk import Aws, CfnOutput, Duration, Fn, Names, RemovalPolicy, Stack
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_sagemaker as sagemaker
from constructs import Construct

from ..config.data import DataConfig
from ..shared.acknowledgments import CFN_GUARD, acknowledge

_LOG_BUCKET = (
    "This bucket receives S3 server access logs of the artifact bucket; logging it to itself or to "
    "another bucket would recurse."
)
_REPLICATION = (
    "Cross-region replication is a per-organisation DR decision; the bucket is versioned, retained and "
    "KMS-encrypted, and replication can be added without replacing it."
)
_SSE_S3 = "S3 server access logging only delivers to SSE-S3 buckets; the logs hold request metadata, not data."
_NO_OBJECT_LOCK = (
    "Object Lock (WORM) would also block the lifecycle rules that expire noncurrent versions and "
    "aborted uploads; the data is versioned and retained (RETAIN), and a models/ retention lock is "
    "a per-organisation decision not taken here."
)
PACKS = ("HIPAA.Security", "NIST.800.53.R5")
# Accepted findings (cdk-nag, Control Tower cfn-guard) on each bucket, rule -> reason.
ACCESS_LOG_BUCKET_FINDINGS = {
    "AwsSolutions-S1": _LOG_BUCKET,
    **{f"{pack}-S3BucketLoggingEnabled": _LOG_BUCKET for pack in PACKS},
    **{f"{pack}-S3DefaultEncryptionKMS": _SSE_S3 for pack in PACKS},
    **{f"{pack}-S3BucketReplicationEnabled": _REPLICATION for pack in PACKS},
    f"{CFN_GUARD}s3_bucket_logging_enabled_check": _LOG_BUCKET,
    f"{CFN_GUARD}s3_bucket_default_encryption_kms_check": _SSE_S3,
    f"{CFN_GUARD}s3_event_notifications_enabled_check": "The bucket only receives S3 server access logs; nothing "
    "consumes their object events.",
    f"{CFN_GUARD}s3_bucket_object_lock_enabled_check": "Access logs expire after data.access_log_expiration_days; "
    "Object Lock would keep them.",
}
ARTIFACT_BUCKET_FINDINGS = {
    **{f"{pack}-S3BucketReplicationEnabled": _REPLICATION for pack in PACKS},
    f"{CFN_GUARD}s3_bucket_object_lock_enabled_check": _NO_OBJECT_LOCK,
}

_LOG_GROUPS_OF_THIS_ACCOUNT = f"arn:{Aws.PARTITION}:logs:{Aws.REGION}:{Aws.ACCOUNT_ID}:log-group:*"
MODEL_PACKAGE_GROUP_EXPORT = "ModelPackageGroupName"  # exported as <Data stack name>:ModelPackageGroupName


class DataStack(Stack):
    """KMS key + versioned, TLS-only, access-logged artifact bucket + model package group; all retained."""

    def __init__(
        self, scope: Construct, construct_id: str, *, data: DataConfig, environment_name: str, **kwargs
    ) -> None:
        """`environment_name`: `<app>-<env>`, which the key's and the package group's descriptions start with."""
        super().__init__(scope, construct_id, **kwargs)

        self.key = self._key(environment_name)
        self.access_log_bucket = self._access_log_bucket(data)

        artifact_rule = s3.LifecycleRule(
            id="tidy-versions-and-uploads",
            abort_incomplete_multipart_upload_after=Duration.days(data.abort_incomplete_multipart_upload_days),
            noncurrent_version_expiration=(
                Duration.days(data.noncurrent_version_expiration_days)
                if data.noncurrent_version_expiration_days is not None
                else None
            ),
        )
        self.bucket = s3.Bucket(
            self,
            "ArtifactBucket",
            encryption=s3.BucketEncryption.KMS,
            encryption_key=self.key,
            bucket_key_enabled=True,
            block_public_access=s3.BlockPublicAccess.BLOCK_ALL,
            enforce_ssl=True,
            versioned=True,
            object_ownership=s3.ObjectOwnership.BUCKET_OWNER_ENFORCED,
            server_access_logs_bucket=self.access_log_bucket,
            server_access_logs_prefix="artifact-bucket/",
            lifecycle_rules=[artifact_rule],
            removal_policy=RemovalPolicy.RETAIN,
        )
        for rule, reason in ARTIFACT_BUCKET_FINDINGS.items():
            acknowledge(self.bucket, rule, reason)

        # Native CloudFormation property instead of `event_bridge_enabled`, which adds a custom-resource
        # Lambda with a managed policy just to flip this switch.
        cfn_bucket = self.bucket.node.default_child
        cfn_bucket.notification_configuration = s3.CfnBucket.NotificationConfigurationProperty(
            event_bridge_configuration=s3.CfnBucket.EventBridgeConfigurationProperty(event_bridge_enabled=True)
        )

        self.model_package_group = self._model_package_group(environment_name)

        CfnOutput(self, "ArtifactBucketName", value=self.bucket.bucket_name)
        CfnOutput(self, "ArtifactKeyArn", value=self.key.key_arn)
        CfnOutput(self, "AccessLogBucketName", value=self.access_log_bucket.bucket_name)
        # Other stacks take the group's name from this export (model_package_group_name), never as a literal.
        export = f"{self.stack_name}:{MODEL_PACKAGE_GROUP_EXPORT}"
        CfnOutput(self, "ModelPackageGroupName", value=self._group_name, export_name=export)
        self.model_package_group_name = Fn.import_value(export)

    def _model_package_group(self, environment_name: str) -> sagemaker.CfnModelPackageGroup:
        """The registry of this environment's models, retained like the bucket its packages point into.

        CloudFormation requires the name, and a stack deployed again after `cdk destroy` creates every resource
        anew (it adopts nothing; a name still held by the retained group fails the deploy), so the name ends
        with the last 12 hex digits of this stack's id, a UUID per stack: stable across updates, new for a new
        stack, which then registers into a new group beside the retained one. Lower case, as SageMaker writes
        it into package ARNs, which the IAM scopes match; at most 50 + 1 + 12 of the API's 63 characters."""
        stack_uuid = Fn.select(2, Fn.split("/", self.stack_id))
        self._group_name = Fn.join(
            "-",
            [
                Names.unique_resource_name(self, max_length=43, separator="-").lower() + "-models",
                Fn.select(4, Fn.split("-", stack_uuid)),
            ],
        )
        group = sagemaker.CfnModelPackageGroup(
            self,
            "ModelPackageGroup",
            model_package_group_name=self._group_name,
            model_package_group_description=f"{environment_name}: QLoRA-merged and Neuron-compiled "
            "models of the Training workflow, with their evaluation and lineage",
        )
        group.apply_removal_policy(RemovalPolicy.RETAIN)
        return group

    def _key(self, environment_name: str) -> kms.Key:
        key = kms.Key(
            self,
            "ArtifactKey",
            description=f"{environment_name}: artifacts, logs, topics and SageMaker volumes",
            enable_key_rotation=True,
            removal_policy=RemovalPolicy.RETAIN,
        )
        # CloudWatch Logs encrypts the other stacks' log groups with this key; only log groups of this
        # account and region (the encryption context names the log group). No kms:DescribeKey: its requests
        # carry no encryption context, so under this condition it could never be allowed.
        key.add_to_resource_policy(
            iam.PolicyStatement(
                sid="CloudWatchLogsOfThisAccount",
                principals=[iam.ServicePrincipal(f"logs.{Aws.REGION}.amazonaws.com")],
                actions=["kms:Encrypt", "kms:Decrypt", "kms:ReEncrypt*", "kms:GenerateDataKey*"],
                resources=["*"],
                conditions={"ArnLike": {"kms:EncryptionContext:aws:logs:arn": _LOG_GROUPS_OF_THIS_ACCOUNT}},
            )
        )
        # Control Tower CT.KMS.PR.3: grants only for AWS resources (SageMaker volumes) or by AWS services.
        key.add_to_resource_policy(
            iam.PolicyStatement(
                sid="GrantsOnlyForAwsResources",
                effect=iam.Effect.DENY,
                principals=[iam.AnyPrincipal()],
                actions=["kms:CreateGrant"],
                resources=["*"],
                conditions={
                    "BoolIfExists": {"kms:GrantIsForAWSResource": "false", "aws:PrincipalIsAWSService": "false"}
                },
            )
        )
        return key

    def _access_log_bucket(self, data: DataConfig) -> s3.Bucket:
        # S3 server access logs cannot be delivered to a KMS-encrypted bucket, hence SSE-S3 here.
        bucket = s3.Bucket(
            self,
            "AccessLogBucket",
            encryption=s3.BucketEncryption.S3_MANAGED,
            block_public_access=s3.BlockPublicAccess.BLOCK_ALL,
            enforce_ssl=True,
            versioned=True,
            object_ownership=s3.ObjectOwnership.BUCKET_OWNER_ENFORCED,
            removal_policy=RemovalPolicy.RETAIN,
            lifecycle_rules=[
                s3.LifecycleRule(
                    id="expire-access-logs",
                    expiration=Duration.days(data.access_log_expiration_days),
                    noncurrent_version_expiration=Duration.days(1),
                    abort_incomplete_multipart_upload_after=Duration.days(data.abort_incomplete_multipart_upload_days),
                )
            ],
        )
        for rule, reason in ACCESS_LOG_BUCKET_FINDINGS.items():
            acknowledge(bucket, rule, reason)
        return bucket
