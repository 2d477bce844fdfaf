"""Start moto on 127.0.0.1, bootstrap it like `cdk bootstrap`, publish assets and deploy stacks."""

from __future__ import annotations

import io
import json
import os
import socket
import time
import urllib.request
import warnings
import zipfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import boto3
import botocore.exceptions
from botocore.config import Config

from local.cloud_assembly import CloudAssemblyReader, StackArtifact

from . import iam_enforcement
from .execution_patches import apply_all as apply_execution_patches
from .inference_components import reset as reset_components
from .job_runner import LocalJobRunner
from .moto_patches import apply_all as apply_moto_patches
from .sagemaker_sync import install as install_sagemaker_sync
from .sagemaker_sync import uninstall as uninstall_sagemaker_sync

BOOTSTRAP_QUALIFIER = "hnb659fds"
BOOTSTRAP_VERSION = "30"
EMULATED_ACCOUNT = "123456789012"  # moto's default account
CAPABILITIES = ["CAPABILITY_IAM", "CAPABILITY_NAMED_IAM", "CAPABILITY_AUTO_EXPAND"]
_TERMINAL_OK = {"CREATE_COMPLETE", "UPDATE_COMPLETE", "IMPORT_COMPLETE"}


class DeployError(RuntimeError):
    """A stack did not reach a *_COMPLETE state; the message carries the failing events."""


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class LocalAws:
    """A running moto server plus clients bound to it. Use `with LocalAws.start() as aws:`."""

    def __init__(self, endpoint_url: str, region: str = "us-east-1", server: Any = None) -> None:
        self.endpoint_url = endpoint_url
        self.region = region
        self.account = EMULATED_ACCOUNT
        self._server = server
        self.clock: Any = None  # execution_patches.EmulatedClock, set by start()
        self.job_runner: Any = None  # job_runner.LocalJobRunner, set by start()
        self.operator: iam_enforcement.Keys | None = None  # the deployer's keys where IAM is enforced
        self.iam = iam_enforcement.LEDGER  # what the roles did (allowed calls, denials)
        self._session = boto3.session.Session(
            aws_access_key_id="emulated", aws_secret_access_key="emulated", region_name=region
        )

    def enforce_iam(self) -> None:
        """From here on every call is checked against its caller's policies: this object's clients (the deployer,
        the tools) sign as the operator user made first, each job as its role, each state machine as its own."""
        keys = iam_enforcement.create_operator(self.client("iam"))
        self.operator = keys
        self._session = boto3.session.Session(region_name=self.region, **keys.session_arguments())
        iam_enforcement.interpreter_clients_use_the_role()
        account, region = self.account, self.region
        self.job_runner.use_identities(
            keys, lambda role_arn: iam_enforcement.assume(account, role_arn, "sagemaker.amazonaws.com", region)
        )
        iam_enforcement.start()

    def credentials_environment(self) -> dict[str, str]:
        """AWS_* variables for a tool run as the operator (or moto's any-key where IAM is not enforced)."""
        if self.operator is None:
            return {"AWS_ACCESS_KEY_ID": "emulated", "AWS_SECRET_ACCESS_KEY": "emulated"}
        return self.operator.environment()

    @classmethod
    @contextmanager
    def start(
        cls,
        *,
        port: int | None = None,
        region: str = "us-east-1",
        keep: bool = False,
        time_scale: float = 1.0,
        work_root: Path | None = None,
        max_trials: int = 3,
        say: Callable[[str], None] | None = None,
        enforce_iam: bool = True,
    ) -> Iterator[LocalAws]:
        """Run moto's threaded server on loopback (inf2 allowed) for the duration of the block, with state
        machines executed and their SageMaker jobs run locally (`aws.job_runner`; `time_scale` shortens the
        workflows' Wait and Retry intervals, `max_trials` caps tuning jobs) and IAM enforced (`enforce_iam`,
        iam_enforcement.py)."""
        import logging

        from moto.moto_server.threaded_moto_server import ThreadedMotoServer

        logging.getLogger("werkzeug").setLevel(logging.ERROR)
        # moto warns per unsupported resource type; `skipped_resources` reports them per stack instead.
        logging.getLogger("moto").setLevel(logging.ERROR)
        # The ASL interpreter logs every absent path an IsPresent test looks at (ERROR level): expected here.
        logging.getLogger("moto.stepfunctions.parser").setLevel(logging.CRITICAL)
        warnings.filterwarnings("ignore", message="Tried to parse .* not supported by moto")
        apply_moto_patches()
        clock = apply_execution_patches(time_scale=time_scale)
        clock.waits.clear()
        port = port or free_port()
        server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
        server.start()
        # moto's backends live in this process, shared by every server it starts: begin from empty.
        endpoint = f"http://127.0.0.1:{port}"
        _post(f"{endpoint}/moto-api/reset", None)
        reset_components()
        _post(f"{endpoint}/moto-api/config", {"stepfunctions": {"execute_state_machine": True}})
        # The interpreter's own AWS calls (SNS, SSM, SageMaker) go to localhost:$MOTO_PORT.
        os.environ["MOTO_PORT"] = str(port)
        aws = cls(endpoint, region, server)
        aws.clock = clock
        aws.job_runner = LocalJobRunner(
            endpoint_url=endpoint, region=region, work_root=work_root, max_trials=max_trials, say=say
        )
        install_sagemaker_sync(aws.job_runner)
        if enforce_iam:
            aws.enforce_iam()
        try:
            yield aws
        finally:
            if not keep:
                iam_enforcement.stop()
                uninstall_sagemaker_sync()
                server.stop()

    def client(self, service: str) -> Any:
        return self._session.client(service, endpoint_url=self.endpoint_url, config=Config(retries={"max_attempts": 2}))

    # -- what `cdk bootstrap` would have created -------------------------------------------------
    @property
    def assets_bucket(self) -> str:
        return f"cdk-{BOOTSTRAP_QUALIFIER}-assets-{self.account}-{self.region}"

    def bootstrap(self) -> None:
        """The version parameter the templates' BootstrapVersion rule reads, and the assets bucket."""
        self.client("ssm").put_parameter(
            Name=f"/cdk-bootstrap/{BOOTSTRAP_QUALIFIER}/version",
            Value=BOOTSTRAP_VERSION,
            Type="String",
            Overwrite=True,
        )
        s3 = self.client("s3")
        existing = {b["Name"] for b in s3.list_buckets().get("Buckets", [])}
        if self.assets_bucket not in existing:
            s3.create_bucket(Bucket=self.assets_bucket)

    # -- assets ----------------------------------------------------------------------------------
    def _substitute(self, text: str) -> str:
        return (
            text.replace("${AWS::AccountId}", self.account)
            .replace("${AWS::Region}", self.region)
            .replace("${AWS::Partition}", "aws")
        )

    def publish_assets(self, cdk_out: str | Path, stacks: list[StackArtifact] | None = None) -> list[str]:
        """Upload every file asset named by the asset manifests (the same ones `cdk deploy` publishes)."""
        reader = CloudAssemblyReader(cdk_out)
        stacks = stacks if stacks is not None else reader.in_dependency_order()
        s3 = self.client("s3")
        uploaded: list[str] = []
        manifests = sorted({m for s in stacks for m in s.asset_manifests})
        for manifest_path in manifests:
            manifest = json.loads(manifest_path.read_text())
            for asset in manifest.get("files", {}).values():
                source = reader.directory / asset["source"]["path"]
                body = _zip_dir(source) if asset["source"].get("packaging") == "zip" else source.read_bytes()
                for destination in asset["destinations"].values():
                    bucket = self._substitute(destination["bucketName"])
                    key = self._substitute(destination["objectKey"])
                    s3.put_object(Bucket=bucket, Key=key, Body=body)
                    uploaded.append(f"s3://{bucket}/{key}")
            if manifest.get("dockerImages"):
                raise DeployError(f"{manifest_path.name}: docker image assets cannot be published locally")
        return uploaded

    # -- CloudFormation --------------------------------------------------------------------------
    def deploy(self, cdk_out: str | Path, stack_names: list[str] | None = None) -> dict[str, dict[str, str]]:
        """Create or update the stacks (and their dependencies) in order; unchanged templates are no-ops."""
        reader = CloudAssemblyReader(cdk_out)
        stacks = reader.in_dependency_order(stack_names)
        self.publish_assets(cdk_out, stacks)
        return {stack.stack_name: self.deploy_stack(stack) for stack in stacks}

    def deploy_stack(self, stack: StackArtifact) -> dict[str, str]:
        cfn = self.client("cloudformation")
        body = stack.template_body()
        current = self._existing(stack.stack_name)
        if current is None:
            try:
                cfn.create_stack(
                    StackName=stack.stack_name,
                    TemplateBody=body,
                    Capabilities=CAPABILITIES,
                    EnableTerminationProtection=stack.termination_protection,
                )
            except botocore.exceptions.ClientError as err:
                self._discard_failed_create(stack.stack_name)
                raise DeployError(f"{stack.stack_name}: create failed and was rolled back: {_message(err)}") from None
        else:
            previous = _as_dict(cfn.get_template(StackName=stack.stack_name)["TemplateBody"])
            if previous != json.loads(body):
                try:
                    cfn.update_stack(StackName=stack.stack_name, TemplateBody=body, Capabilities=CAPABILITIES)
                except botocore.exceptions.ClientError as err:
                    self._roll_back(stack.stack_name, previous)
                    raise DeployError(
                        f"{stack.stack_name}: update failed and was rolled back: {_message(err)}"
                    ) from None
        self.wait(stack.stack_name)
        return self.outputs(stack.stack_name)

    # moto validates resources synchronously and answers a failed create/update with an error, leaving
    # the stack half-applied; CloudFormation would roll back. These two do what CloudFormation does.
    def _roll_back(self, stack_name: str, previous: dict) -> None:
        """UPDATE_ROLLBACK: re-apply the last template that deployed, removing what the failed update added."""
        self.client("cloudformation").update_stack(
            StackName=stack_name, TemplateBody=json.dumps(previous), Capabilities=CAPABILITIES
        )
        self.wait(stack_name)

    def _discard_failed_create(self, stack_name: str) -> None:
        """ROLLBACK of a failed create: the half-created stack is deleted, as `cdk deploy` would need."""
        if self._existing(stack_name) is not None:
            self.client("cloudformation").delete_stack(StackName=stack_name)

    def _existing(self, stack_name: str) -> dict | None:
        cfn = self.client("cloudformation")
        try:
            described = cfn.describe_stacks(StackName=stack_name)["Stacks"][0]
        except cfn.exceptions.ClientError:
            return None
        return None if described["StackStatus"] == "DELETE_COMPLETE" else described

    def status(self, stack_name: str) -> str:
        return self.client("cloudformation").describe_stacks(StackName=stack_name)["Stacks"][0]["StackStatus"]

    def wait(self, stack_name: str, timeout_s: float = 120.0) -> str:
        deadline = time.monotonic() + timeout_s
        while True:
            status = self.status(stack_name)
            if not status.endswith("_IN_PROGRESS"):
                break
            if time.monotonic() > deadline:
                raise DeployError(f"{stack_name}: still {status} after {timeout_s:.0f}s")
            time.sleep(0.2)
        if status not in _TERMINAL_OK:
            events = self.client("cloudformation").describe_stack_events(StackName=stack_name)["StackEvents"]
            reasons = [
                f"{e['LogicalResourceId']}: {e.get('ResourceStatusReason')}"
                for e in events
                if e.get("ResourceStatus", "").endswith("FAILED")
            ]
            raise DeployError(f"{stack_name}: {status}; {'; '.join(reasons[:5]) or 'no failure events'}")
        return status

    def outputs(self, stack_name: str) -> dict[str, str]:
        described = self.client("cloudformation").describe_stacks(StackName=stack_name)["Stacks"][0]
        return {o["OutputKey"]: o["OutputValue"] for o in described.get("Outputs", [])}

    def resources(self, stack_name: str) -> dict[str, dict]:
        """Logical id -> summary (type, physical id, status) of a deployed stack."""
        cfn = self.client("cloudformation")
        summaries = cfn.list_stack_resources(StackName=stack_name)["StackResourceSummaries"]
        return {s["LogicalResourceId"]: s for s in summaries}

    def skipped_resources(self, stack: StackArtifact) -> dict[str, str]:
        """Template resources the emulator did not create (types moto does not model): id -> type."""
        template = json.loads(stack.template_body())
        created = {k for k, v in self.resources(stack.stack_name).items() if v.get("PhysicalResourceId")}
        return {
            logical_id: resource["Type"]
            for logical_id, resource in sorted(template.get("Resources", {}).items())
            if logical_id not in created and resource["Type"] != "AWS::CDK::Metadata"
        }

    def delete(self, stack_name: str) -> None:
        """Delete a stack. moto deletes resources in template order, not in reverse dependency order as
        CloudFormation does, so a role can fail before its attached policies are gone: retry, as each
        attempt removes what it could."""
        cfn = self.client("cloudformation")
        for attempt in range(5):
            try:
                cfn.delete_stack(StackName=stack_name)
                break
            except botocore.exceptions.ClientError as err:
                if err.response["Error"].get("Code") != "DeleteConflict" or attempt == 4:
                    raise DeployError(f"{stack_name}: delete failed: {_message(err)}") from None
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            current = self._existing(stack_name)
            if current is None:
                return
            if current["StackStatus"] == "DELETE_FAILED":
                raise DeployError(f"{stack_name}: DELETE_FAILED")
            time.sleep(0.2)
        raise DeployError(f"{stack_name}: not deleted after 60s")


def _post(url: str, body: dict | None) -> None:
    data = None if body is None else json.dumps(body).encode()
    urllib.request.urlopen(urllib.request.Request(url, data=data, method="POST"), timeout=30)


def _message(err: botocore.exceptions.ClientError) -> str:
    return str(err.response.get("Error", {}).get("Message", err))[:300]


def _as_dict(body: Any) -> dict:
    """boto3 returns JSON template bodies already parsed; YAML or raw strings arrive as text."""
    return json.loads(body) if isinstance(body, str) else dict(body)


def _zip_dir(directory: Path) -> bytes:
    """Directory assets are zipped by the CDK CLI; do the same, deterministically."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for path in sorted(p for p in directory.rglob("*") if p.is_file()):
            info = zipfile.ZipInfo(path.relative_to(directory).as_posix(), date_time=(1980, 1, 1, 0, 0, 0))
            info.external_attr = 0o644 << 16
            archive.writestr(info, path.read_bytes())
    return buffer.getvalue()
