"""What a training job is given about its base model beyond the hyperparameters, and the grant that goes with it.

A gated or private hub model is downloaded with a token kept in Secrets Manager (training.hub_token_secret): the
job gets the secret's ARN as a CreateTrainingJob Environment entry and reads the token itself at start-up
(training_code/qlora/finetune/hub_token.py), so the token never enters a template, a hyperparameter or the job
request. The Environment rather than a hyperparameter: it is fixed by the stack (an execution's input overrides
hyperparameters, never the Environment), it is not a train.py flag (the report and the model card record those),
and it is what SageMaker containers are configured with. The job role may read that one secret and, when the
config names the secret's customer-managed key, decrypt with that key through Secrets Manager only.
"""

from __future__ import annotations

from aws_cdk import aws_iam as iam

from ..code_contract.qlora import hub_token_variable
from ..config.training import TrainingConfig


def job_environment(training: TrainingConfig) -> dict[str, str] | None:
    """The training job's Environment; None (the image's own) when the config names nothing to pass."""
    if training.hub_token_secret is None:
        return None
    return {hub_token_variable(): training.hub_token_secret}


def hub_token_statements(training: TrainingConfig) -> list[iam.PolicyStatement]:
    """Read the hub token's secret (its ARN exactly); decrypt it with its customer-managed key, only as Secrets
    Manager decrypts this secret (kms:ViaService, and the SecretARN encryption context Secrets Manager sets)."""
    secret = training.hub_token_secret
    if secret is None:
        return []
    statements = [
        iam.PolicyStatement(sid="ReadHubTokenSecret", actions=["secretsmanager:GetSecretValue"], resources=[secret])
    ]
    if training.hub_token_kms_key is not None:
        region = secret.split(":")[3]
        statements.append(
            iam.PolicyStatement(
                sid="DecryptHubTokenSecret",
                actions=["kms:Decrypt"],
                resources=[training.hub_token_kms_key],
                conditions={
                    "StringEquals": {
                        "kms:ViaService": f"secretsmanager.{region}.amazonaws.com",
                        "kms:EncryptionContext:SecretARN": secret,
                    }
                },
            )
        )
    return statements
