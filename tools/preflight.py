#!/usr/bin/env python3
"""Checks before anything touches an environment's AWS account; each refusal is one line, exit 2.

    tools/preflight.py variables --env prod --stage deploy   # deploy.yml, before assuming the role
    tools/preflight.py identity --env prod                   # after: the credentials' account and region

`variables` reads the values deploy-environment.yml hands it (PREFLIGHT_ROLE_ARN, PREFLIGHT_REGION: the GitHub
variables AWS_<DIFF|DEPLOY>_ROLE_ARN_<ENV> and AWS_REGION_<ENV>, one name per environment, so no environment can
read another's) and refuses a missing or malformed one, a role in another account than config/<env>.yaml pins, a
region other than the pinned one, and an environment whose `deploy.require_pinned` is true while `account` or
`region` is null.

`identity` (also `make diff` and `make deploy TARGET=aws`) asks STS whose credentials these are and refuses
none at all (naming what to set: a profile, the AWS_* key variables, a region), and an account or region other
than the pinned ones. AWS_ENDPOINT_URL points it at an emulator.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from stacks.config import ConfigError, load_config  # noqa: E402
from stacks.config.app_config import ACCOUNT_PATTERN, REGION_PATTERN  # noqa: E402

ROLE_ARN = re.compile(rf"arn:aws[a-z-]*:iam::({ACCOUNT_PATTERN}):role/[\w+=,.@/-]{{1,512}}")
ROLE_VARIABLE = {"diff": "AWS_DIFF_ROLE_ARN", "deploy": "AWS_DEPLOY_ROLE_ARN"}
REPOSITORY = "a repository variable (Settings > Secrets and variables > Actions > Variables)"
WHERE = {
    "diff": "a repository variable (the diff job runs outside the GitHub environment)",
    "deploy": "a variable of the GitHub environment {env} (Settings > Environments > {env})",
}
NO_CREDENTIALS = (
    "no AWS credentials: set AWS_PROFILE to a profile in ~/.aws/config (after `aws sso login --profile NAME` for "
    "SSO), or AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (and AWS_SESSION_TOKEN for temporary keys)"
)


class Refusal(Exception):
    """What is wrong and what to set, in one line."""


def _pinned(config) -> None:
    """A `require_pinned` environment with account or region null never deploys: say what to write."""
    deploy = config.deploy
    if deploy is None or not deploy.require_pinned:
        return
    missing = [name for name in ("account", "region") if getattr(config, name) is None]
    if missing:
        raise Refusal(
            f"{config.source}: {' and '.join(missing)}: null, and deploy.require_pinned is true: {config.env_name} "
            f"deploys only into the account and region its file names: set account: '<12 digits>' (the account of "
            f"AWS_DEPLOY_ROLE_ARN_{config.env_name.upper()}) and region: <e.g. us-east-1> in {config.source}"
        )


def check_variables(config, stage: str, environ: dict[str, str]) -> str:
    """The role and region variables of one stage of deploy.yml, before any credentials exist."""
    suffix = config.env_name.upper()
    role_name, region_name = f"{ROLE_VARIABLE[stage]}_{suffix}", f"AWS_REGION_{suffix}"
    where = WHERE[stage].format(env=config.env_name)
    for name, value in ((role_name, "PREFLIGHT_ROLE_ARN"), (region_name, "PREFLIGHT_REGION")):
        if not environ.get(value, "").strip():
            raise Refusal(f"{name} is not set: add it as {where if name == role_name else REPOSITORY}")
    role, region = environ["PREFLIGHT_ROLE_ARN"].strip(), environ["PREFLIGHT_REGION"].strip()
    match = ROLE_ARN.fullmatch(role)
    if match is None:
        raise Refusal(f"{role_name}: got {role!r}; expected an IAM role ARN, arn:aws:iam::<12 digits>:role/<name>")
    if not re.fullmatch(REGION_PATTERN, region):
        raise Refusal(f"{region_name}: got {region!r}; expected a region such as us-east-1")
    _pinned(config)
    if config.account is not None and match.group(1) != config.account:
        raise Refusal(
            f"{role_name} is a role in account {match.group(1)}, but {config.source} pins account {config.account}: "
            f"set {role_name} to {config.env_name}'s role"
        )
    if config.region is not None and region != config.region:
        raise Refusal(f"{region_name} is {region}, but {config.source} pins region {config.region}: set it to that")
    return f"{config.env_name} {stage}: {role_name} and {region_name} set" + _pin_note(config)


def check_identity(config, session=None) -> str:
    """Whose credentials these are (STS), against the account and region the environment pins."""
    import boto3
    import botocore.exceptions as errors

    try:
        # AWS_REGION first, as the CDK CLI (the JavaScript SDK) reads it; botocore itself reads AWS_DEFAULT_REGION
        session = session or boto3.Session(region_name=os.environ.get("AWS_REGION") or None)
    except errors.ProfileNotFound as err:
        raise Refusal(f"{err}: set AWS_PROFILE to a profile in ~/.aws/config, or unset it") from None
    if session.get_credentials() is None:
        raise Refusal(NO_CREDENTIALS + f"; and a region: AWS_REGION{_or_pinned(config)}")
    region = session.region_name
    if region is None:
        raise Refusal(f"no AWS region: set AWS_REGION (or region in your profile){_or_pinned(config)}")
    _pinned(config)
    try:
        account = session.client("sts").get_caller_identity()["Account"]
    except (errors.ClientError, errors.BotoCoreError) as err:
        why = _one_line(err)
        raise Refusal(f"STS could not confirm the credentials ({why}): refresh them, e.g. aws sso login") from None
    if config.account is not None and account != config.account:
        raise Refusal(
            f"these credentials are for account {account}, but {config.source} pins account {config.account}: "
            f"use {config.env_name}'s credentials (profile or role)"
        )
    if config.region is not None and region != config.region:
        raise Refusal(f"the region is {region}, but {config.source} pins region {config.region}: set AWS_REGION")
    return f"{config.env_name}: credentials for account {account} in {region}" + _pin_note(config)


def _or_pinned(config) -> str:
    return "" if config.region is not None else f", or pin region: in {config.source}"


def _pin_note(config) -> str:
    if config.account is None:
        return f" ({config.source} pins no account)"
    return f" ({config.source} pins account {config.account}, region {config.region})"


def _one_line(err: Exception) -> str:
    return " ".join(str(err).split())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("check", choices=("variables", "identity"))
    parser.add_argument("--env", required=True, help="environment, config/<env>.yaml")
    parser.add_argument("--stage", choices=sorted(ROLE_VARIABLE), default="deploy", help="variables: whose role")
    parser.add_argument("--config-dir", default=os.path.relpath(ROOT / "config"), help="default: the repository's")
    args = parser.parse_args(argv)
    try:
        config = load_config(args.env, args.config_dir)
        if args.check == "variables":
            line = check_variables(config, args.stage, dict(os.environ))
        else:
            line = check_identity(config)
    except (Refusal, ConfigError) as err:
        print(f"preflight {args.env}: {err}", file=sys.stderr)
        return 2
    print(f"preflight {line}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
