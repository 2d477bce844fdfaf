"""Which resource types a reviewer cares about, and why: the tables the classification reads."""

from __future__ import annotations

REPLACING = ("WILL_REPLACE", "MAY_REPLACE")  # the engine's impacts that create a new physical resource

# Resource types whose replacement or deletion loses data or breaks clients: (class, what is at stake).
SENSITIVE: dict[str, tuple[str, str]] = {
    "AWS::KMS::Key": ("stateful", "a new key; data encrypted under the old key needs the old key to be read"),
    "AWS::S3::Bucket": ("stateful", "a new, empty bucket; objects do not move"),
    "AWS::Logs::LogGroup": ("stateful", "a new, empty log group; past logs stay behind"),
    "AWS::SSM::Parameter": ("stateful", "the stored value (e.g. the last trained model prefix) starts over"),
    "AWS::DynamoDB::Table": ("stateful", "a new, empty table"),
    "AWS::EFS::FileSystem": ("stateful", "a new, empty file system"),
    "AWS::RDS::DBInstance": ("stateful", "a new database"),
    "AWS::RDS::DBCluster": ("stateful", "a new database cluster"),
    "AWS::ECR::Repository": ("stateful", "a new, empty image repository"),
    "AWS::SecretsManager::Secret": ("stateful", "a new secret value"),
    "AWS::SQS::Queue": ("stateful", "a new, empty queue; queued messages are lost"),
    "AWS::SageMaker::Endpoint": ("user-facing", "clients call the endpoint by name"),
    "AWS::SageMaker::EndpointConfig": ("user-facing", "the configuration the endpoint runs"),
    "AWS::SNS::Topic": ("user-facing", "a new topic ARN; subscribers (alarm e-mails) must subscribe again"),
    "AWS::StepFunctions::StateMachine": ("user-facing", "a new ARN; callers and execution history stay with the old"),
}
IAM_PREFIXES = ("AWS::IAM::",)
IAM_POLICY_TYPES = (
    "AWS::S3::BucketPolicy",
    "AWS::KMS::Key",
    "AWS::SNS::TopicPolicy",
    "AWS::SQS::QueuePolicy",
    "AWS::Lambda::Permission",
)
SG_TYPES = ("AWS::EC2::SecurityGroup", "AWS::EC2::SecurityGroupIngress", "AWS::EC2::SecurityGroupEgress")
