"""IAM enforcement on the emulator: every call is signed by an identity and checked against its policies.

moto 5.2 authenticates each request once `INITIAL_NO_AUTH_ACTION_COUNT` calls have passed (0 here): the access
key names an IAM user or an assumed role, and the action must be allowed by that identity's policies (inline and
attached; groups for users). This module turns that on for the emulator's process and gives each caller the
identity it has on AWS:
- the operator (deploys, `make train`'s tools, the pipeline's uploads): the IAM user `emulator-operator` with
  an allow-all inline policy, created before enforcement starts, as an administrator's credentials would be;
- a SageMaker job: its request's RoleArn, assumed as sagemaker.amazonaws.com (the trust policy is checked);
- a state machine's service calls (the .sync SageMaker integration and CallAwsService tasks): its role, assumed
  as states.amazonaws.com;
- an EventBridge rule's Step Functions target: the target's RoleArn must allow states:StartExecution on it.

What moto evaluates, and what this adds (docs/local-emulation.md lists the rest): moto matches Action and
Resource of identity policies, but only S3 (and SQS, IAM, STS) tell it the request's resource; any other service
checks resource `*`, which no ARN-scoped statement matches. `RESOURCES` names the resource AWS checks for the
calls our workflows make (the Service Authorization Reference's resource types); a call not listed there is
checked on its action alone and recorded so (`resource_known: false`). SageMaker's iam:PassRole check on the
job's RoleArn is added. Conditions are not evaluated (moto's evaluator ignores unknown keys and operators) and
resource policies (bucket, key, topic policies) not at all.

Each allowed call of an assumed role is recorded with the policy and statement that allowed it (`Ledger`), so a
run shows which grants it used; each denial with AWS's message (action and resource).
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass, field
from typing import Any, Final

from moto import settings
from moto.core.authorization import ActionAuthenticatorMixin
from moto.core.exceptions import AccessDeniedError, _RESTError
from moto.core.responses import BaseResponse
from moto.iam import access_control
from moto.iam.models import iam_backends
from moto.s3.exceptions import S3AccessDeniedError
from moto.sts.models import sts_backends

from .moto_patches import patch_once

OPERATOR_USER: Final = "emulator-operator"
ALLOW_ALL: Final = {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "*", "Resource": "*"}]}
PARTITION: Final = "aws"

# action -> (the request parameter naming the resource, the ARN it becomes: {region}, {account}, {value})
RESOURCES: Final[dict[str, tuple[str, str]]] = {
    "sagemaker:CreateTrainingJob": ("TrainingJobName", "arn:aws:sagemaker:{region}:{account}:training-job/{value}"),
    "sagemaker:DescribeTrainingJob": (
        "TrainingJobName",
        "arn:aws:sagemaker:{region}:{account}:training-job/{value}",
    ),
    "sagemaker:StopTrainingJob": ("TrainingJobName", "arn:aws:sagemaker:{region}:{account}:training-job/{value}"),
    "sagemaker:CreateHyperParameterTuningJob": (
        "HyperParameterTuningJobName",
        "arn:aws:sagemaker:{region}:{account}:hyper-parameter-tuning-job/{value}",
    ),
    "sagemaker:DescribeHyperParameterTuningJob": (
        "HyperParameterTuningJobName",
        "arn:aws:sagemaker:{region}:{account}:hyper-parameter-tuning-job/{value}",
    ),
    "sagemaker:ListTrainingJobsForHyperParameterTuningJob": (
        "HyperParameterTuningJobName",
        "arn:aws:sagemaker:{region}:{account}:hyper-parameter-tuning-job/{value}",
    ),
    # a version is created in its group (its own ARN is not known before the call)
    "sagemaker:CreateModelPackage": (
        "ModelPackageGroupName",
        "arn:aws:sagemaker:{region}:{account}:model-package-group/{value}",
    ),
    "ssm:PutParameter": ("Name", "arn:aws:ssm:{region}:{account}:parameter/{value}"),
    "ssm:GetParameter": ("Name", "arn:aws:ssm:{region}:{account}:parameter/{value}"),
    "sns:Publish": ("TopicArn", "{value}"),
    "states:StartExecution": ("stateMachineArn", "{value}"),
}


@dataclass
class Ledger:
    """What the assumed roles did: `calls` (allowed, with the statement that allowed each) and `denials`."""

    calls: list[dict[str, Any]] = field(default_factory=list)
    denials: list[dict[str, Any]] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def allowed(self, entry: dict[str, Any]) -> None:
        with self._lock:
            self.calls.append(entry)

    def denied(self, entry: dict[str, Any]) -> None:
        with self._lock:
            self.denials.append(entry)

    def as_json(self) -> dict[str, Any]:
        with self._lock:
            return {"calls": list(self.calls), "denials": list(self.denials)}


LEDGER = Ledger()


def denial_message(principal: str, action: str, resource: str) -> str:
    """AWS's AccessDenied message for an identity-policy denial."""
    return (
        f"User: {principal} is not authorized to perform: {action} on resource: {resource} because no "
        f"identity-based policy allows the {action} action"
    )


class Denied(AccessDeniedError):
    def __init__(self, message: str) -> None:
        _RESTError.__init__(self, "AccessDenied", message)


class S3Denied(S3AccessDeniedError):
    def __init__(self, message: str) -> None:
        Exception.__init__(self, message)
        self.code, self.message = "AccessDenied", message


# -- evaluation ------------------------------------------------------------------------------------
def role_policies(account: str, role_name: str) -> list[tuple[str, dict]]:
    """(policy name, document) of a role's inline and attached policies, as moto stores them."""
    backend = iam_backends[account][PARTITION]
    found = []
    for name in backend.list_role_policies(role_name):
        found.append((name, json.loads(backend.get_role_policy(role_name, name)[1])))
    for policy in backend.list_attached_role_policies(role_name)[0]:
        version = next(v for v in policy.versions if v.is_default)
        document = version.document
        found.append((policy.name, json.loads(document) if isinstance(document, str) else document))
    return found


def _statements(document: dict) -> list[dict]:
    statements = document["Statement"]
    return statements if isinstance(statements, list) else [statements]


def evaluate(account: str, role_name: str, action: str, resource: str | None) -> dict[str, Any] | None:
    """The statement that allows `action` on `resource` (None: resource unknown, matched on the action alone)
    by moto's own statement matcher, or None when none does or one denies it."""
    allowed_by = None
    for policy_name, document in role_policies(account, role_name):
        for index, statement in enumerate(_statements(document)):
            checked = dict(statement) if resource else {k: v for k, v in statement.items() if k != "Resource"}
            result = access_control.IAMPolicyStatement(checked).is_action_permitted(action, resource or "*")
            if result == access_control.PermissionResult.DENIED:
                return None
            if result == access_control.PermissionResult.PERMITTED and allowed_by is None:
                allowed_by = {
                    "role": role_name,
                    "policy": policy_name,
                    "statement": index,
                    "sid": statement.get("Sid"),
                    "granted": _matching(statement, "Action", action),
                    "resource_entry": _entry_index(statement, resource) if resource else None,
                }
    return allowed_by


def _entries(statement: dict, element: str) -> list[str]:
    entries = statement.get(element, [])
    return [entries] if isinstance(entries, str) else list(entries)


def _matching(statement: dict, element: str, value: str) -> str:
    """The statement's `element` (Action) entry that matched `value`: what a mutation removes."""
    for entry in _entries(statement, element):
        if access_control.IAMPolicyStatement._match(entry, value):
            return entry
    return value


def _entry_index(statement: dict, resource: str) -> int | None:
    """The index of the statement's Resource entry that matched `resource` (the template lists them in the same
    order)."""
    for index, entry in enumerate(_entries(statement, "Resource")):
        if access_control.IAMPolicyStatement._match(entry, resource):
            return index
    return None


def check(
    account: str, role_name: str, principal: str, action: str, resource: str | None, *, s3: bool = False
) -> dict[str, Any]:
    """Record the call; raise AccessDenied (AWS's message) when the role's policies do not allow it."""
    allowed_by = evaluate(account, role_name, action, resource)
    shown = resource or "*"
    if allowed_by is None:
        message = denial_message(principal, action, shown)
        LEDGER.denied({"principal": principal, "action": action, "resource": shown, "message": message})
        raise S3Denied(message) if s3 else Denied(message)
    LEDGER.allowed(
        {"principal": principal, "action": action, "resource": shown, "resource_known": bool(resource), **allowed_by}
    )
    return allowed_by


# -- moto patches ----------------------------------------------------------------------------------
def _resource_of(self: BaseResponse) -> str:
    """The resource AWS checks for this request (RESOURCES), or `*` where it is not listed."""
    scope = self.headers.get("Authorization", "").partition("Credential=")[2].split("/")
    service = scope[3] if len(scope) > 3 else ""
    known = RESOURCES.get(f"{service}:{self._get_action()}")
    if known is None:
        return "*"
    try:
        value = self._get_param(known[0])
    except Exception:  # noqa: BLE001 - a body this parser cannot read: the call is checked on its action
        return "*"
    if not value:
        return "*"
    return known[1].format(region=self.region, account=self.current_account, value=str(value).lstrip("/"))


def _passed_role(body: Any, action: str) -> str | None:
    """The RoleArn a CreateTrainingJob / CreateHyperParameterTuningJob request passes to SageMaker."""
    if action not in ("sagemaker:CreateTrainingJob", "sagemaker:CreateHyperParameterTuningJob"):
        return None
    try:
        request = json.loads(body or "{}")
    except ValueError:
        return None
    return request.get("RoleArn") or request.get("TrainingJobDefinition", {}).get("RoleArn")


def _check_action_permitted(original):
    def check_action_permitted(self, resource: str) -> None:
        key = self._access_key
        if not isinstance(key, access_control.AssumedRoleAccessKey) or self._action == "sts:GetCallerIdentity":
            return original(self, resource)
        s3 = isinstance(self, access_control.S3IAMRequest)
        known = None if resource == "*" and not s3 else resource
        role = key._owner_role_name
        check(self.account_id, role, key.arn, self._action, known, s3=s3)
        passed = _passed_role(self._body, self._action)
        if passed:  # SageMaker checks that the caller may pass the job's role to it
            check(self.account_id, role, key.arn, "iam:PassRole", passed)

    return check_action_permitted


def apply_patches() -> None:
    if not hasattr(BaseResponse, "_determine_resource"):
        BaseResponse._determine_resource = _resource_of
    patch_once(access_control.IAMRequestBase, "check_action_permitted", _check_action_permitted)


# -- identities ------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Keys:
    access_key_id: str
    secret_access_key: str
    session_token: str | None = None

    def environment(self) -> dict[str, str]:
        env = {"AWS_ACCESS_KEY_ID": self.access_key_id, "AWS_SECRET_ACCESS_KEY": self.secret_access_key}
        return env | ({"AWS_SESSION_TOKEN": self.session_token} if self.session_token else {})

    def session_arguments(self) -> dict[str, str | None]:
        return {
            "aws_access_key_id": self.access_key_id,
            "aws_secret_access_key": self.secret_access_key,
            "aws_session_token": self.session_token,
        }


class NotTrusted(RuntimeError):
    """The role's trust policy does not let the service assume it."""


def trusts(account: str, role_arn: str, service: str) -> bool:
    role = iam_backends[account][PARTITION].get_role_by_arn(role_arn)
    for statement in _statements(json.loads(role.assume_role_policy_document)):
        services = statement.get("Principal", {}).get("Service", [])
        services = [services] if isinstance(services, str) else services
        actions = statement.get("Action", [])
        actions = [actions] if isinstance(actions, str) else actions
        if statement.get("Effect") == "Allow" and service in services and "sts:AssumeRole" in actions:
            return True
    return False


_ASSUMED: dict[tuple[str, str], Keys] = {}
_ASSUMED_LOCK = threading.Lock()


def assume(account: str, role_arn: str, service: str, region: str) -> Keys:
    """Credentials of `role_arn` as `service` gets them (STS AssumeRole on the emulator), after the role's trust
    policy is checked for that service principal; one session per role and service."""
    with _ASSUMED_LOCK:
        if (role_arn, service) in _ASSUMED:
            return _ASSUMED[(role_arn, service)]
        if not trusts(account, role_arn, service):
            raise NotTrusted(f"{service} cannot assume {role_arn}: its trust policy does not name the service")
        session = service.split(".")[0]
        assumed = sts_backends[account][PARTITION].assume_role(
            region_name=region,
            role_session_name=f"emulated-{session}",
            role_arn=role_arn,
            policy="",
            duration=43200,
            external_id="",
        )
        keys = Keys(assumed.access_key_id, assumed.secret_access_key, assumed.session_token)
        _ASSUMED[(role_arn, service)] = keys
        return keys


def create_operator(iam_client: Any) -> Keys:
    """The operator's IAM user, allowed everything (made while moto still takes unsigned calls)."""
    iam_client.create_user(UserName=OPERATOR_USER)
    iam_client.put_user_policy(UserName=OPERATOR_USER, PolicyName="AllowAll", PolicyDocument=json.dumps(ALLOW_ALL))
    key = iam_client.create_access_key(UserName=OPERATOR_USER)["AccessKey"]
    return Keys(key["AccessKeyId"], key["SecretAccessKey"])


_BEFORE: list[float] = []  # moto's setting before start(), restored by stop()


def start() -> None:
    """From the next call on, every request is authenticated and authorized."""
    apply_patches()
    if not _BEFORE:
        _BEFORE.append(settings.INITIAL_NO_AUTH_ACTION_COUNT)
    _ASSUMED.clear()
    LEDGER.calls.clear()
    LEDGER.denials.clear()
    settings.INITIAL_NO_AUTH_ACTION_COUNT = 0
    ActionAuthenticatorMixin.request_count = 0


def stop() -> None:
    """moto as it ships: no authentication (other emulators in this process, mock_aws, take any key)."""
    settings.INITIAL_NO_AUTH_ACTION_COUNT = _BEFORE.pop() if _BEFORE else float("inf")
    ActionAuthenticatorMixin.request_count = 0
    _ASSUMED.clear()


# -- the state machines' service calls --------------------------------------------------------------
def _role_client(original):
    def boto_client_for(region: str, service: str, state_credentials: Any = None) -> Any:
        """The interpreter's client for a task, signed with the state machine's role (assumed as Step Functions)
        instead of moto's fixed placeholder key."""
        client = original(region, service, state_credentials)
        role_arn = getattr(state_credentials, "role_arn", None)
        if not role_arn or not enforcing():
            return client
        keys = assume(role_arn.split(":")[4], role_arn, "states.amazonaws.com", region)
        import boto3

        return boto3.client(
            service_name=service,
            region_name=region,
            endpoint_url=client.meta.endpoint_url,
            config=client.meta.config,
            **keys.session_arguments(),
        )

    return boto_client_for


def interpreter_clients_use_the_role() -> None:
    """Every interpreter module that imported moto's `boto_client_for` gets the role-signed one."""
    import sys

    from moto.stepfunctions.parser.asl.component.state.exec.state_task.service import state_task_service_factory
    from moto.stepfunctions.parser.asl.utils import boto_client

    del state_task_service_factory  # imported for its side effect: every integration module is loaded
    original = getattr(boto_client.boto_client_for, "__wrapped_original__", boto_client.boto_client_for)
    replacement = _role_client(original)
    replacement.__wrapped_original__ = original
    for name, module in list(sys.modules.items()):
        current = getattr(module, "boto_client_for", None) if name.startswith("moto.stepfunctions.parser") else None
        if current is not None and getattr(current, "__wrapped_original__", None) is None:
            module.boto_client_for = replacement


def rule_may_start(target: dict, account: str) -> None:
    """EventBridge delivers to a Step Functions target with the target's RoleArn: it must allow
    states:StartExecution on the state machine (raises AccessDenied otherwise)."""
    role_arn = target.get("RoleArn")
    if not role_arn:
        message = f"EventBridge target {target['Arn']} has no RoleArn to start it with"
        LEDGER.denied({"principal": "events.amazonaws.com", "action": "states:StartExecution", "message": message})
        raise Denied(message)
    if not trusts(account, role_arn, "events.amazonaws.com"):
        raise NotTrusted(f"events.amazonaws.com cannot assume {role_arn}: its trust policy does not name the service")
    role = role_arn.rsplit("/", 1)[-1]
    principal = f"arn:aws:sts::{account}:assumed-role/{role}/emulated-events"
    check(account, role, principal, "states:StartExecution", target["Arn"])


def enforcing() -> bool:
    return settings.INITIAL_NO_AUTH_ACTION_COUNT == 0
