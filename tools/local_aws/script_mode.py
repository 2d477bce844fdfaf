"""What SageMaker's training toolkit hands a script-mode entry point, computed from a CreateTrainingJob request.

The variables and the command line follow the toolkit's documented contract (sagemaker-training-toolkit,
ENVIRONMENT_VARIABLES.md): `SM_HPS`/`SM_HP_<NAME>` and `--name value` arguments with every value JSON-decoded
where it parses (so `"true"` arrives as `True`, `"4"` as `4`), `SM_CHANNEL_<NAME>` per input channel and
the `/opt/ml` folders, here under a temporary root instead of `/opt/ml` itself.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

SCRIPT_MODE_KEYS = ("sagemaker_program", "sagemaker_submit_directory")


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
    def checkpoints(self) -> Path:
        return self.root / "checkpoints"

    @property
    def code(self) -> Path:
        return self.root / "code"

    def create(self, channels: list[str]) -> None:
        for folder in (self.input_config, self.model, self.output_data, self.checkpoints, self.code,
                       *(self.channel(c) for c in channels)):
            folder.mkdir(parents=True, exist_ok=True)


def decoded(value: str) -> Any:
    """The toolkit's reading of one hyperparameter string: JSON when it parses, else the string itself."""
    try:
        return json.loads(value)
    except (TypeError, ValueError):
        return value


def user_hyperparameters(hyperparameters: Mapping[str, str]) -> dict[str, Any]:
    """The hyperparameters the script sees (the toolkit keeps `sagemaker_*` keys for itself), decoded."""
    return {k: decoded(v) for k, v in sorted(hyperparameters.items()) if not k.startswith("sagemaker_")}


def _argument(value: Any) -> str:
    """A decoded value on the command line: strings as they are, objects and lists as JSON, else str()."""
    if isinstance(value, str):
        return value
    return json.dumps(value) if isinstance(value, (dict, list)) else str(value)


def command_line(hyperparameters: Mapping[str, str]) -> list[str]:
    """`--name value` per user hyperparameter in sorted order, as the toolkit's `to_cmd_args` builds them."""
    argv: list[str] = []
    for name, value in user_hyperparameters(hyperparameters).items():
        argv += [f"--{name}", _argument(value)]
    return argv


def _channels(request: Mapping[str, Any]) -> list[str]:
    return [c["ChannelName"] for c in request.get("InputDataConfig", [])]


def resource_config(request: Mapping[str, Any]) -> dict[str, Any]:
    """resourceconfig.json of the job's one host (also SM_RESOURCE_CONFIG)."""
    return {"current_host": "algo-1", "hosts": ["algo-1"], "network_interface_name": "eth0",
            "current_instance_type": request["ResourceConfig"]["InstanceType"]}


def write_input_config(request: Mapping[str, Any], tree: OptMl) -> None:
    """hyperparameters.json, inputdataconfig.json and resourceconfig.json, as SageMaker writes them."""
    hyperparameters = dict(request.get("HyperParameters") or {})
    data_config = {
        c["ChannelName"]: {
            "TrainingInputMode": c.get("InputMode", "File"),
            "S3DistributionType": c["DataSource"]["S3DataSource"].get("S3DataDistributionType", "FullyReplicated"),
            "RecordWrapperType": "None",
        }
        for c in request.get("InputDataConfig", [])
    }
    for name, value in (("hyperparameters.json", hyperparameters), ("inputdataconfig.json", data_config),
                        ("resourceconfig.json", resource_config(request))):
        (tree.input_config / name).write_text(json.dumps(value, indent=2))


def environment(request: Mapping[str, Any], tree: OptMl, *, job_arn: str, num_cpus: int) -> dict[str, str]:
    """The SM_* variables (and the job's identity) the toolkit exports before it starts the entry point."""
    hyperparameters = dict(request.get("HyperParameters") or {})
    channels = _channels(request)
    program = decoded(hyperparameters["sagemaker_program"])
    resource = resource_config(request)
    hps = user_hyperparameters(hyperparameters)
    env = {
        "SM_MODEL_DIR": str(tree.model),
        "SM_INPUT_DIR": str(tree.root / "input"),
        "SM_INPUT_CONFIG_DIR": str(tree.input_config),
        "SM_OUTPUT_DIR": str(tree.output),
        "SM_OUTPUT_DATA_DIR": str(tree.output_data),
        "SM_OUTPUT_INTERMEDIATE_DIR": str(tree.output / "intermediate"),
        "SM_CHANNELS": json.dumps(channels),
        "SM_HPS": json.dumps(hps),
        "SM_USER_ARGS": json.dumps(command_line(hyperparameters)),
        "SM_USER_ENTRY_POINT": str(program),
        "SM_MODULE_NAME": str(program).removesuffix(".py"),
        "SM_MODULE_DIR": str(decoded(hyperparameters["sagemaker_submit_directory"])),
        "SM_CURRENT_HOST": "algo-1",
        "SM_HOSTS": json.dumps(["algo-1"]),
        "SM_CURRENT_INSTANCE_TYPE": resource["current_instance_type"],
        "SM_NUM_GPUS": "0",
        "SM_NUM_CPUS": str(num_cpus),
        "SM_NETWORK_INTERFACE_NAME": "eth0",
        "SM_LOG_LEVEL": "20",
        "SM_RESOURCE_CONFIG": json.dumps(resource),
        "SM_TRAINING_ENV": json.dumps({"job_name": request["TrainingJobName"], "hyperparameters": hps,
                                       "channel_input_dirs": {c: str(tree.channel(c)) for c in channels},
                                       "model_dir": str(tree.model), "output_data_dir": str(tree.output_data)}),
        "TRAINING_JOB_NAME": request["TrainingJobName"],
        "TRAINING_JOB_ARN": job_arn,
    }
    env.update({f"SM_CHANNEL_{c.upper()}": str(tree.channel(c)) for c in channels})
    env.update({f"SM_HP_{k.upper()}": v if isinstance(v, str) else json.dumps(v) for k, v in hps.items()})
    return env


def child_environment(sm_env: Mapping[str, str], *, endpoint_url: str, region: str,
                      base: Mapping[str, str] | None = None) -> dict[str, str]:
    """This process's environment minus anything SM_*/AWS_*, plus the job's: AWS calls go to the emulator,
    signed with the emulator's throw-away keys (in SageMaker the job role's credentials stand there)."""
    base = os.environ if base is None else base
    env = {k: v for k, v in base.items() if not k.startswith(("SM_", "AWS_"))}
    env.update(sm_env)
    env.update({
        "AWS_ENDPOINT_URL": endpoint_url,
        "AWS_ACCESS_KEY_ID": "emulated",
        "AWS_SECRET_ACCESS_KEY": "emulated",
        "AWS_REGION": region,
        "AWS_DEFAULT_REGION": region,
        "AWS_EC2_METADATA_DISABLED": "true",
        "PYTHONUNBUFFERED": "1",
    })
    return env
