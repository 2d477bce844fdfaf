"""The Hugging Face hub token of a gated or private base model, read from AWS Secrets Manager at start-up.

The Training stack gives the job only the secret's ARN (the CreateTrainingJob Environment's SECRET_VARIABLE); the
token is fetched here with the job role's credentials, which may read that one secret, and handed to
huggingface_hub inside this process as HF_TOKEN, which it reads on every request. So the token is in no
template, hyperparameter, command line, report or model card (those record the parsed arguments only), and
nothing here prints it. Standard library at import (the stacks read SECRET_VARIABLE from this file); boto3,
which every SageMaker training image has, only when a secret is named.
"""

from __future__ import annotations

import json
import os
from collections.abc import MutableMapping

SECRET_VARIABLE = "HF_TOKEN_SECRET_ARN"
TOKEN_VARIABLE = "HF_TOKEN"  # huggingface_hub's (utils.get_token): read from the environment on every request
# A secret stored as key/value pairs (the console's default form) keeps the token under one of these keys.
TOKEN_KEYS = ("HF_TOKEN", "token")


class HubTokenError(ValueError):
    """The named secret cannot give a token; str() names the secret and the fix, never the value."""


def _token(text: str | None, arn: str) -> str:
    """The token in the secret's string: the whole string, or the value of a TOKEN_KEYS key of a JSON object."""
    value = (text or "").strip()
    if value.startswith("{"):
        try:
            pairs = json.loads(value)
        except ValueError:
            pairs = {}
        found = [pairs[key] for key in TOKEN_KEYS if isinstance(pairs.get(key), str)]
        if not found:
            keys = ", ".join(sorted(map(str, pairs))) or "none readable"
            raise HubTokenError(
                f"secret {arn}: a JSON object without a string {' or '.join(TOKEN_KEYS)} (its keys: {keys}); store "
                "the token as the secret's plain text or under one of those keys"
            )
        value = found[0].strip()
    if not value:
        raise HubTokenError(f"secret {arn}: its SecretString is empty; store the hub token as its value")
    return value


def read_hub_token(environ: MutableMapping[str, str] | None = None) -> str | None:
    """Set HF_TOKEN from the secret SECRET_VARIABLE names; returns the ARN read, None when none is named."""
    environ = os.environ if environ is None else environ
    arn = environ.get(SECRET_VARIABLE)
    if not arn:
        return None
    import boto3
    from botocore.exceptions import BotoCoreError, ClientError

    try:
        # The secret's own region (an ARN's fourth field), whichever region the job runs in.
        client = boto3.client("secretsmanager", region_name=arn.split(":")[3])
        response = client.get_secret_value(SecretId=arn)
    except ClientError as error:
        code = error.response.get("Error", {}).get("Code", "error")
        raise HubTokenError(
            f"secret {arn}: GetSecretValue failed ({code}); the job role may read exactly the secret "
            "training.hub_token_secret names (and decrypt it with training.hub_token_kms_key): check both"
        ) from None
    except (BotoCoreError, IndexError) as error:
        raise HubTokenError(f"secret {arn}: GetSecretValue failed ({type(error).__name__})") from None
    environ[TOKEN_VARIABLE] = _token(response.get("SecretString"), arn)
    return arn
