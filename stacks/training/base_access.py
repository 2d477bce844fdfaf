"""What a training job is given about its base model beyond the hyperparameters, and the grant that goes with it.

The base's record: the facts of config/models/<name>.yaml the run checks the weights it resolves against before
loading them (training_code/qlora/finetune/base_record.py), so a base other than the model the serving profile was
checked for is refused before hours of training. A gated or private hub model is downloaded with a token kept in
Secrets Manager (training.hub_token_secret): the job gets the secret's ARN and reads the token itself at start-up
(training_code/qlora/finetune/hub_token.py), so the token never enters a template, a hyperparameter or the job
request. Both go in the CreateTrainingJob Environment rather than in hyperparameters: it is fixed by the stack (an
execution's input overrides hyperparameters, never the Environment), it holds no train.py flag (the report and the
model card record those), and it is what SageMaker containers are configured with. The job role may read that one
secret and, when the config names the secret's customer-managed key, decrypt with that key through Secrets Manager
only.
"""

from __future__ import annotations

from ..code_contract.qlora import base_record_environment, hub_token_variable
from ..config import ConfigError
from ..config import aws_limits as aws
from ..config.base_model_record import MODELS_DIR, record_dict
from ..config.model_catalog import BaseModel
from ..config.training import TrainingConfig
from ..shared.job_access import JobSecret


def job_environment(training: TrainingConfig, base: BaseModel | None) -> dict[str, str] | None:
    """The training job's Environment; None (the image's own) when the config names nothing to pass. Each value
    is at most what CreateTrainingJob takes (botocore's TrainingEnvironmentValue). `base`: the training base's
    catalog record (config/models/), or None."""
    found: dict[str, str] = {}
    if base is not None:
        # The hub id only where the job downloads by it: an isolated job's request names no hub model.
        hub_id = base.record.hub_id if training.base_model_key is None else None
        record_file = f"config/{MODELS_DIR}/{base.name}.yaml"
        name, value = base_record_environment(record_file, record_dict(base.record), hub_id)
        longest = aws.map_value_length(aws.TRAINING_ENVIRONMENT)
        if len(value) > longest:
            raise ConfigError(
                base.source,
                "hub_id",
                f"the facts a training run checks, with this record's name and hub id, take {len(value)} "
                f"characters; the job's environment value holds at most {longest} "
                f"({aws.TRAINING_ENVIRONMENT.label} value): shorten the hub id",
            )
        found[name] = value
    if training.hub_token_secret is not None:
        found[hub_token_variable()] = training.hub_token_secret
    return found or None


def hub_token_secrets(training: TrainingConfig) -> tuple[JobSecret, ...]:
    """The hub token's secret (its ARN exactly), and its customer-managed key: the job role may read that one
    secret, and decrypt it only as Secrets Manager decrypts it (kms:ViaService, the SecretARN context)."""
    if training.hub_token_secret is None:
        return ()
    return (JobSecret("HubToken", training.hub_token_secret, training.hub_token_kms_key),)
