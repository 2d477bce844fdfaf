"""What SageMaker itself prepares before a training container's `train` starts, for one CreateTrainingJob request:
the `/opt/ml` tree (here under a temporary base dir, which the toolkit reads as `SAGEMAKER_BASE_DIR`), the three
input/config/*.json files the toolkit reads, and the container's environment (the image's
`SAGEMAKER_TRAINING_MODULE`, the job's identity, AWS calls signed for the emulator).

Everything a script-mode entry point sees beyond that (SM_* variables, the command line, the code download, the
failure file) is the SageMaker training toolkit's own doing (job_runner.py runs it).
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

OPT_ML = "/opt/ml/"
# The framework module each framework image sets in its Dockerfile (`ENV SAGEMAKER_TRAINING_MODULE`); the
# PyTorch and Hugging Face PyTorch training images both use the PyTorch one.
PYTORCH_MODULE = "sagemaker_pytorch_container.training:main"


@dataclass(frozen=True)
class OptMl:
    """The `/opt/ml` tree of one job, rooted at `root`."""

    root: Path

    @property
    def input_config(self) -> Path:
        return self.root / "input" / "config"

    def channel(self, name: str) -> Path:
        return self.root / "input" / "data" / name

    @property
    def model(self) -> Path:
        return self.root / "model"

    @property
    def output(self) -> Path:
        return self.root / "output"

    @property
    def output_data(self) -> Path:
        return self.root / "output" / "data"

    @property
    def failure(self) -> Path:
        return self.root / "output" / "failure"

    @property
    def checkpoints(self) -> Path:
        return self.root / "checkpoints"

    def create(self, channels: list[str]) -> None:
        """The folders SageMaker mounts; `code` is left absent, so the toolkit downloads the code itself."""
        for folder in (
            self.input_config,
            self.model,
            self.output_data,
            self.checkpoints,
            *(self.channel(c) for c in channels),
        ):
            folder.mkdir(parents=True, exist_ok=True)

    def rebased(self, value: str) -> str:
        """A hyperparameter naming a path under /opt/ml, as the container sees the mount (e.g. the isolated
        mode's `sagemaker_submit_directory` in the code channel): the same path under this tree."""
        return str(self.root / value[len(OPT_ML) :]) if value.startswith(OPT_ML) else value

    def rebased_json(self, value: str) -> str:
        """`rebased` for a JSON-encoded hyperparameter string (the SDK's `"\"/opt/ml/...\""` form) too."""
        try:
            decoded = json.loads(value)
        except ValueError:
            return self.rebased(value)
        return json.dumps(self.rebased(decoded)) if isinstance(decoded, str) else value


def framework_module(image: str) -> str | None:
    """The SAGEMAKER_TRAINING_MODULE the image would set; None: the toolkit runs the entry point itself."""
    return PYTORCH_MODULE if "pytorch" in image else None


def resource_config(request: Mapping[str, Any]) -> dict[str, Any]:
    """resourceconfig.json of the job's one host."""
    return {
        "current_host": "algo-1",
        "hosts": ["algo-1"],
        "network_interface_name": "eth0",
        "current_instance_type": request["ResourceConfig"]["InstanceType"],
        "current_group_name": "homogeneousCluster",
        "instance_groups": [
            {
                "instance_group_name": "homogeneousCluster",
                "instance_type": request["ResourceConfig"]["InstanceType"],
                "hosts": ["algo-1"],
            }
        ],
    }


def write_input_config(request: Mapping[str, Any], tree: OptMl) -> None:
    """hyperparameters.json, inputdataconfig.json and resourceconfig.json, as SageMaker writes them."""
    hyperparameters = {k: tree.rebased_json(v) for k, v in (request.get("HyperParameters") or {}).items()}
    data_config = {
        c["ChannelName"]: {
            "TrainingInputMode": c.get("InputMode", "File"),
            "S3DistributionType": c["DataSource"]["S3DataSource"].get("S3DataDistributionType", "FullyReplicated"),
            "RecordWrapperType": "None",
        }
        for c in request.get("InputDataConfig", [])
    }
    for name, value in (
        ("hyperparameters.json", hyperparameters),
        ("inputdataconfig.json", data_config),
        ("resourceconfig.json", resource_config(request)),
    ):
        (tree.input_config / name).write_text(json.dumps(value, indent=2))


def container_environment(
    request: Mapping[str, Any],
    tree: OptMl,
    *,
    job_arn: str,
    endpoint_url: str,
    region: str,
    base: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """This process's environment minus anything SM_*/AWS_*/SAGEMAKER_*/PIP_*, plus what the job's container has:
    the base dir, the image's framework module, the job's name and ARN, and AWS calls (the toolkit's code download
    among them) sent to the emulator with its throw-away keys (in SageMaker the job role's credentials)."""
    base = os.environ if base is None else base
    env = {k: v for k, v in base.items() if not k.startswith(("SM_", "AWS_", "SAGEMAKER_", "PIP_"))}
    module = framework_module(request.get("AlgorithmSpecification", {}).get("TrainingImage", ""))
    env.update(
        {
            "SAGEMAKER_BASE_DIR": str(tree.root),
            "TRAINING_JOB_NAME": request["TrainingJobName"],
            "TRAINING_JOB_ARN": job_arn,
            # The toolkit's switch for running outside SageMaker's cluster: no wait for the `algo-1` DNS name.
            "SM_STUDIO_LOCAL_MODE": "True",
            # requirements.txt is pip-installed by the toolkit: from what is installed here only (.venv stands in
            # for the image; no index, no find-links, no pip.conf of this machine), so a missing package or an
            # unmet pin fails the job instead of changing the environment. Each listed pin is checked, not its
            # dependencies again: .venv was resolved with them (requirements-dev.txt includes every job's
            # requirements.txt), and re-resolving took 2.3 s of the 3 s pip spent per job.
            "PIP_NO_INDEX": "1",
            "PIP_NO_DEPS": "1",
            "PIP_CONFIG_FILE": os.devnull,
            "PIP_DISABLE_PIP_VERSION_CHECK": "1",
            "AWS_ENDPOINT_URL": endpoint_url,
            "AWS_ACCESS_KEY_ID": "emulated",
            "AWS_SECRET_ACCESS_KEY": "emulated",
            "AWS_REGION": region,
            "AWS_DEFAULT_REGION": region,
            "AWS_EC2_METADATA_DISABLED": "true",
            "PYTHONUNBUFFERED": "1",
        }
    )
    if module:
        env["SAGEMAKER_TRAINING_MODULE"] = module
    return env
