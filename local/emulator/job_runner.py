"""Run a SageMaker training job on this machine through the SageMaker training toolkit: emulation.

What SageMaker does is done here (opt_ml.py): the channels are downloaded from S3 into `input/data/<channel>`
(and CheckpointConfig.S3Uri into `checkpoints`, so a retry resumes), input/config/*.json written, and the
image's entry point run: the toolkit's `train` (`sagemaker_training.cli.train`, sagemaker-training 5.1.4) with
the image's framework module (`sagemaker_pytorch_container.training:main`, sagemaker-pytorch-training 3.0.0),
which downloads `sagemaker_submit_directory`, pip-installs its requirements.txt, sets the SM_* variables, maps
the hyperparameters to the command line and writes `output/failure`. Afterwards, as SageMaker does: metrics are
the MetricDefinitions applied to the log (last value, as 32-bit floats), the model folder is uploaded
uncompressed (`CompressionType: NONE`) or as `model.tar.gz`, `output/data` as `output.tar.gz`, checkpoints are
synced back, a failed job's FailureReason is `AlgorithmError: <first 1,024 characters of the failure file>,
exit code: N`, and a job past MaxRuntimeInSeconds is stopped (SIGTERM) and ends `Stopped` with SecondaryStatus
`MaxRuntimeExceeded`, its model uploaded as SageMaker does after a stop.

What differs: .venv stands in for the image (requirements.txt is checked against it: pip --no-index --no-deps), one
process without GPUs, a temporary base dir instead of /opt/ml, no network isolation. A job that is not script
mode (a ContainerEntrypoint, such as the Neuron compile step's `optimum-cli export neuron`) needs its image's
own programs and is failed with a FailureReason that says so: it runs only on AWS.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tarfile
import tempfile
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import boto3
from botocore.config import Config
from botocore.exceptions import ClientError

from .faults import CAPACITY_REASON, MAX_RUNTIME_DRILL_S, FaultPlan
from .job_metrics import parse_metrics
from .opt_ml import OPT_ML, OptMl, container_environment, write_input_config
from .s3_folders import download_prefix, split_s3, upload_folder

TIMED_OUT, STOPPED = -9001, -9002  # exit codes the runner gives a job it ended itself
REPOSITORY = Path(__file__).resolve().parents[2]
LMI_IMAGE_PROGRAM = "/usr/local/bin/dockerd-entrypoint.sh"  # the LMI NeuronX image's ENTRYPOINT
LMI_IMAGE = re.compile(r"djl-inference:(\d+)\.(\d+)\.(\d+)-neuronx")
VLLM_IMAGE = "huggingface-vllm-inference-neuronx:"  # the vLLM Neuron image, whose PATH has optimum-cli
OPTIMUM_EXPORT = "optimum-cli export neuron"


def container_stand_in(request: Mapping[str, Any]) -> tuple[list[str], dict[str, str]] | None:
    """(the stand-in's command, its environment) for a container job whose image program has one here: the LMI
    NeuronX image's `partition` (local/emulator/lmi_partition.py), told the image's neuronx-cc, or the vLLM
    Neuron image's `optimum-cli` (local/emulator/optimum_export.py, found first on PATH); else None."""
    from stacks.serving.backends.lmi_neuronx.config import NEURONX_CC

    from .lmi_partition import COMPILER_VARIABLE

    spec = request.get("AlgorithmSpecification", {})
    command = " ".join([*(spec.get("ContainerEntrypoint") or []), *(spec.get("ContainerArguments") or [])])
    if VLLM_IMAGE in spec.get("TrainingImage", "") and OPTIMUM_EXPORT in command:
        return [sys.executable, "-m", "local.emulator.optimum_export"], {}
    tag = LMI_IMAGE.search(spec.get("TrainingImage", ""))
    if tag is None or LMI_IMAGE_PROGRAM not in spec.get("ContainerArguments", []):
        return None
    compiler = NEURONX_CC.get(tuple(int(g) for g in tag.groups()))
    if compiler is None:
        return None
    return [sys.executable, "-m", "local.emulator.lmi_partition"], {COMPILER_VARIABLE: compiler}


def _path_shim(folder: Path, name: str, program: list[str]) -> str:
    """`folder/name`, a script that runs `program` with its arguments: the image's program found first on PATH."""
    folder.mkdir(parents=True, exist_ok=True)
    script = folder / name
    script.write_text("#!/bin/sh\nexec " + " ".join(shlex.quote(part) for part in program) + ' "$@"\n')
    script.chmod(0o755)
    return str(folder)


def _wait(process: subprocess.Popen, limit_s: float, cancelled: Callable[[], bool]) -> int:
    """The exit code, or TIMED_OUT / STOPPED after terminating the container: its process group (the toolkit
    and the script it started), SIGTERM then SIGKILL, as stopping a container signals all of it."""
    deadline = time.monotonic() + limit_s
    while True:
        try:
            return process.wait(timeout=0.2)  # returns as the container exits; else checks the limits again
        except subprocess.TimeoutExpired:
            pass
        ended = TIMED_OUT if time.monotonic() > deadline else STOPPED if cancelled() else None
        if ended is not None:
            _signal_group(process, signal.SIGTERM)
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                _signal_group(process, signal.SIGKILL)
                process.wait()
            return ended


def _signal_group(process: subprocess.Popen, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, sig)


@dataclass
class JobOutcome:
    """What DescribeTrainingJob reports once the job has ended."""

    status: str  # Completed | Failed | Stopped
    failure_reason: str | None
    metrics: dict[str, float]
    model_artifacts: str | None
    started: datetime
    ended: datetime
    log: list[str] = field(default_factory=list)
    secondary_status: str = ""  # SageMaker's last SecondaryStatus; empty: the same as `status`

    def final_metric_data_list(self) -> list[dict[str, Any]]:
        return [{"MetricName": k, "Value": v, "Timestamp": self.ended} for k, v in sorted(self.metrics.items())]


class LocalJobRunner:
    """Runs CreateTrainingJob requests; `say` gets one progress line per phase (the pipeline prints them)."""

    def __init__(
        self,
        *,
        endpoint_url: str,
        region: str,
        work_root: Path | None = None,
        python: str = sys.executable,
        faults: FaultPlan | None = None,
        max_trials: int = 3,
        say: Callable[[str], None] | None = None,
        extra_env: Mapping[str, str] | None = None,
    ) -> None:
        """`extra_env`: added to every job's environment (the pipeline's offline hub cache, hub_cache.py)."""
        self.endpoint_url = endpoint_url
        self.region = region
        self.work_root = Path(work_root or tempfile.mkdtemp(prefix="local-sagemaker-"))
        self.python = python
        self.faults = faults or FaultPlan()
        self.max_trials = max_trials
        self.say = say or (lambda line: None)
        self.extra_env = dict(extra_env or {})
        self.requests: list[dict[str, Any]] = []  # every job request run, in order (tests read them)
        # where IAM is enforced (iam_enforcement.py): RoleArn -> the role's keys, as SageMaker assumes it
        self.role_keys: Callable[[str], Any] | None = None
        self._own_keys: dict[str, str] = {}
        self._s3 = self._s3_client(None)

    def _s3_client(self, keys: Any) -> Any:
        """S3 signed with `keys` (iam_enforcement.Keys; None: any key, where IAM is not enforced)."""
        any_key = {"aws_access_key_id": "emulated", "aws_secret_access_key": "emulated"}
        session = boto3.session.Session(region_name=self.region, **(keys.session_arguments() if keys else any_key))
        return session.client("s3", endpoint_url=self.endpoint_url, config=Config(retries={"max_attempts": 2}))

    def use_identities(self, operator: Any, role_keys: Callable[[str], Any]) -> None:
        """Sign the runner's own calls (tests' direct runs without a RoleArn) with `operator` and each job's
        S3 transfers and container with its RoleArn's keys (`role_keys`)."""
        self._s3, self.role_keys, self._own_keys = self._s3_client(operator), role_keys, operator.environment()

    def _job_identity(self, request: Mapping[str, Any]) -> tuple[Any, dict[str, str]]:
        """(the S3 client SageMaker moves the job's data with, the container's credential variables): the role's
        where IAM is enforced; without RoleArn (direct runs; CreateTrainingJob requires one) the runner's own."""
        role_arn = request.get("RoleArn")
        if self.role_keys is None or not role_arn:
            return self._s3, self._own_keys
        keys = self.role_keys(role_arn)
        return self._s3_client(keys), keys.environment()

    # -- one job ---------------------------------------------------------------------------------
    def run(
        self, request: Mapping[str, Any], *, job_arn: str, cancelled: Callable[[], bool] = lambda: False
    ) -> JobOutcome:
        """Run one job to its end; never raises for a failure of the job itself (that is the outcome).
        `cancelled` is polled while the script runs: true (the execution was stopped) stops the job, as Step
        Functions calls StopTrainingJob when a `.sync` task's execution stops."""
        request = dict(request)
        self.requests.append(request)
        name = request["TrainingJobName"]
        started = datetime.now(UTC)
        tree = OptMl(self.work_root / name)
        drill = self.faults.hit("run", name)
        if drill == "capacity":
            return _failed(CAPACITY_REASON, started)
        stand_in = container_stand_in(request)
        if "sagemaker_program" not in (request.get("HyperParameters") or {}) and stand_in is None:
            return _failed(self._not_script_mode(request), started)
        try:
            s3, credentials = self._job_identity(request)
            self._stage(request, tree, s3)
        except (LookupError, ValueError, RuntimeError) as err:  # RuntimeError: SageMaker may not assume the role
            return _failed(f"ClientError: {err}", started)
        except ClientError as err:
            return _failed(f"ClientError: Data download failed: {err}", started)
        if drill == "algorithm_error":
            _crash_entry_point(tree)
        limit = MAX_RUNTIME_DRILL_S if drill == "max_runtime" else None
        if stand_in is not None:
            code, lines = self._execute_container(
                request, tree, stand_in, job_arn=job_arn, cancelled=cancelled, credentials=credentials
            )
        else:
            code, lines = self._execute(
                request, tree, job_arn=job_arn, cancelled=cancelled, limit_s=limit, credentials=credentials
            )
        definitions = self._metric_definitions(request)
        if drill == "no_metrics":
            lines = [line for line in lines if not parse_metrics([line], definitions)]
        metrics = parse_metrics(lines, definitions)
        try:
            return self._finish(request, tree, code, metrics, lines, started, s3)
        except ClientError as err:
            return _failed(f"ClientError: Failed to upload the job's output: {err}", started, metrics, lines)

    def _finish(
        self, request: Mapping[str, Any], tree: OptMl, code: int, metrics: dict, lines: list, started: datetime, s3: Any
    ) -> JobOutcome:
        """Checkpoints and outputs uploaded as SageMaker does after the container ends; the outcome."""
        name = request["TrainingJobName"]
        self._sync_checkpoints_up(request, tree, s3)
        if code in (STOPPED, TIMED_OUT):  # SageMaker uploads what the job saved before it stopped
            artifacts = self._upload_outputs(request, tree, s3)
            secondary = "MaxRuntimeExceeded" if code == TIMED_OUT else "Stopped"
            self.say(f"    {name}: Stopped ({secondary}) -> {artifacts}")
            return JobOutcome("Stopped", None, metrics, artifacts, started, datetime.now(UTC), lines, secondary)
        if code != 0:
            return _failed(algorithm_error(code, tree), started, metrics, lines)
        artifacts = self._upload_outputs(request, tree, s3)
        self.say(f"    {name}: Completed ({len(metrics)} metric(s)) -> {artifacts}")
        return JobOutcome("Completed", None, metrics, artifacts, started, datetime.now(UTC), lines)

    @staticmethod
    def _metric_definitions(request: Mapping[str, Any]) -> list[Mapping[str, str]]:
        return list(request.get("AlgorithmSpecification", {}).get("MetricDefinitions") or [])

    @staticmethod
    def _not_script_mode(request: Mapping[str, Any]) -> str:
        spec = request.get("AlgorithmSpecification", {})
        entry = " ".join(spec.get("ContainerEntrypoint") or []) or "the image's own entry point"
        return (
            f"AlgorithmError: not run locally: the job runs `{entry[:200]}` from image "
            f"{spec.get('TrainingImage', '?')}, whose programs (for the Neuron compile step, the Neuron "
            "compiler) no registry here ships; this step runs only on AWS (turn it off in the local "
            "environment's config)"
        )

    # -- staging: code, channels, checkpoints ----------------------------------------------------
    def _stage(self, request: Mapping[str, Any], tree: OptMl, s3: Any) -> None:
        channels = request.get("InputDataConfig", [])
        if tree.root.exists():
            shutil.rmtree(tree.root)
        tree.create([c["ChannelName"] for c in channels])
        write_input_config(request, tree)
        for channel in channels:
            source = channel["DataSource"]["S3DataSource"]
            if source.get("S3DataType", "S3Prefix") != "S3Prefix":
                raise ValueError(f"channel {channel['ChannelName']}: S3DataType {source['S3DataType']} is not emulated")
            count = download_prefix(s3, source["S3Uri"], tree.channel(channel["ChannelName"]))
            self.say(f"    channel {channel['ChannelName']}: {count} object(s) from {source['S3Uri']}")
        checkpoint = request.get("CheckpointConfig")
        if checkpoint:
            download_prefix(s3, checkpoint["S3Uri"], tree.checkpoints, required=False)

    # -- the entry point ------------------------------------------------------------------------
    def _execute(
        self,
        request: Mapping[str, Any],
        tree: OptMl,
        *,
        job_arn: str,
        cancelled: Callable[[], bool],
        limit_s: float | None = None,
        credentials: Mapping[str, str] | None = None,
    ) -> tuple[int, list[str]]:
        """The image's entry point, the toolkit's `train` console script (`sagemaker_training.cli.train:main`),
        in the container's environment with the request's Environment set, as SageMaker sets it (the toolkit
        passes it on to the script)."""
        argv = [self.python, "-m", "sagemaker_training.cli.train"]
        env = {
            **container_environment(request, tree, job_arn=job_arn, endpoint_url=self.endpoint_url, region=self.region),
            **(credentials or {}),  # the execution role's session, which SageMaker's container gets
            **(request.get("Environment") or {}),
            **self.extra_env,
        }
        limit = limit_s or request.get("StoppingCondition", {}).get("MaxRuntimeInSeconds", 86400)
        self.say(f"    {request['TrainingJobName']}: train ({env.get('SAGEMAKER_TRAINING_MODULE', 'toolkit')})")
        log_path = tree.root / "job.log"
        started = time.monotonic()
        with log_path.open("w") as log:
            code = _wait(
                subprocess.Popen(
                    argv, cwd=tree.root, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
                ),
                limit,
                cancelled,
            )
        lines = log_path.read_text(errors="replace").splitlines()
        self.say(
            f"    {request['TrainingJobName']}: exit {code} after {time.monotonic() - started:.1f}s (log {log_path})"
        )
        return code, lines

    def _execute_container(
        self,
        request: Mapping[str, Any],
        tree: OptMl,
        stand_in: tuple[list[str], dict[str, str]],
        *,
        job_arn: str,
        cancelled: Callable[[], bool],
        credentials: Mapping[str, str] | None = None,
    ) -> tuple[int, list[str]]:
        """A container job's own command (ContainerEntrypoint + ContainerArguments, its Environment), /opt/ml
        rebased onto the job's tree and the image's program replaced by its stand-in (container_stand_in)."""
        program, extra_env = stand_in
        spec = request["AlgorithmSpecification"]
        argv: list[str] = []
        for item in [*spec["ContainerEntrypoint"], *spec.get("ContainerArguments", [])]:
            argv.extend(program if item == LMI_IMAGE_PROGRAM else [item.replace(OPT_ML.rstrip("/"), str(tree.root))])
        env = {
            **container_environment(request, tree, job_arn=job_arn, endpoint_url=self.endpoint_url, region=self.region),
            **(credentials or {}),
            **(request.get("Environment") or {}),
            **extra_env,
            "PYTHONPATH": str(REPOSITORY),
        }
        if program[-1] == "local.emulator.optimum_export":  # the image's optimum-cli, which its script calls by name
            path = env.get("PATH", os.environ.get("PATH", ""))
            env["PATH"] = _path_shim(tree.root / "image-bin", "optimum-cli", program) + os.pathsep + path
        limit = request.get("StoppingCondition", {}).get("MaxRuntimeInSeconds", 86400)
        self.say(f"    {request['TrainingJobName']}: {spec['ContainerEntrypoint'][0]} (image program: stand-in)")
        log_path = tree.root / "job.log"
        with log_path.open("w") as log:
            process = subprocess.Popen(
                argv, cwd=tree.root, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
            )
            code = _wait(process, limit, cancelled)
        if code not in (0, TIMED_OUT, STOPPED) and not tree.failure.exists():  # as SageMaker reports the log's end
            tree.failure.write_text("\n".join(log_path.read_text(errors="replace").splitlines()[-5:]))
        return code, log_path.read_text(errors="replace").splitlines()

    # -- outputs ----------------------------------------------------------------------------------
    def _upload_outputs(self, request: Mapping[str, Any], tree: OptMl, s3: Any) -> str:
        output = request["OutputDataConfig"]
        bucket, key = split_s3(output["S3OutputPath"])
        prefix = f"{key.rstrip('/')}/{request['TrainingJobName']}/output/".lstrip("/")
        if output.get("CompressionType", "GZIP") == "NONE":
            upload_folder(s3, tree.model, bucket, prefix + "model/")
            artifacts = f"s3://{bucket}/{prefix}model/"
        else:
            s3.put_object(Bucket=bucket, Key=prefix + "model.tar.gz", Body=_tarball(tree.model))
            artifacts = f"s3://{bucket}/{prefix}model.tar.gz"
        s3.put_object(Bucket=bucket, Key=prefix + "output.tar.gz", Body=_tarball(tree.output_data))
        return artifacts

    def _sync_checkpoints_up(self, request: Mapping[str, Any], tree: OptMl, s3: Any) -> None:
        checkpoint = request.get("CheckpointConfig")
        if not checkpoint:
            return
        bucket, key = split_s3(checkpoint["S3Uri"])
        upload_folder(s3, tree.checkpoints, bucket, f"{key.rstrip('/')}/")


def _crash_entry_point(tree: OptMl) -> None:
    """The algorithm_error drill: hyperparameters.json names an entry point the code does not have, so the
    toolkit's script fails (python exits 2) and the toolkit reports it as it reports any crashing script."""
    path = tree.input_config / "hyperparameters.json"
    hyperparameters = json.loads(path.read_text())
    hyperparameters["sagemaker_program"] = json.dumps("drill_algorithm_error_injected_by_the_emulator.py")
    path.write_text(json.dumps(hyperparameters, indent=2))


def algorithm_error(code: int, tree: OptMl) -> str:
    """SageMaker's FailureReason for a container that exited non-zero: the first 1,024 characters of the failure
    file (the toolkit writes one) and the exit code."""
    detail = tree.failure.read_text(errors="replace")[:1024] if tree.failure.is_file() else ""
    return f"AlgorithmError: {detail}, exit code: {code}"


def _failed(reason: str, started: datetime, metrics: dict | None = None, lines: list | None = None) -> JobOutcome:
    return JobOutcome("Failed", reason, metrics or {}, None, started, datetime.now(UTC), lines or [])


def _tarball(folder: Path) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as archive:
        for path in sorted(p for p in folder.rglob("*") if p.is_file()):
            archive.add(path, arcname=path.relative_to(folder).as_posix())
    return buffer.getvalue()
