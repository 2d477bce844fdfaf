"""The root of an environment's configuration: identity, placement and one section per stack."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from . import aws_limits as aws
from .data import DataConfig
from .deploy import DeployConfig
from .errors import ConfigError
from .model_catalog import BaseModel, is_hub_id
from .model_lock import ModelLock
from .network import NetworkConfig
from .pruning import PruningConfig
from .rehearsal import RehearsalConfig
from .scale_to_zero import check_deploy_approval
from .schema import setting
from .serving import ServingConfig
from .training import OFFLINE_IMAGE, TrainingConfig

ACCOUNT_PATTERN = r"\d{12}"
REGION_PATTERN = r"[a-z]{2}(-gov|-iso[a-z]?)?-[a-z]+-\d"


@dataclass(frozen=True)
class AppConfig:
    """One environment (dev, prod, ...). `env_name` and `source` come from the file, not its content."""

    app_name: str = setting("llm-inf2", pattern=r"[a-z][a-z0-9-]{1,23}", hint="lower-case, starts with a letter")
    account: str | None = setting(None, pattern=ACCOUNT_PATTERN, hint="12 digits, or null for any account")
    region: str | None = setting(None, pattern=REGION_PATTERN, hint="e.g. us-east-1, or null for any region")
    termination_protection: bool = setting(False)
    # AWS tag rules (the strictest of the resources we tag): keys and values as long as SageMaker's Tag allows, of
    # this alphabet (the ASCII part of its \p{L}\p{Z}\p{N} classes); project: values not empty, which CloudFormation
    # refuses for some resources only at deploy; keys not aws: (reserved).
    tags: dict[str, str] = setting(
        {},
        key_pattern=rf"(?!aws:)[A-Za-z0-9 _.:/=+\-@]{{1,{aws.setting_range(aws.TAG_KEY)[1]}}}",
        pattern=rf"[A-Za-z0-9 _.:/=+\-@]{{1,{aws.setting_range(aws.TAG_VALUE)[1]}}}",
        hint="AWS tag characters, not empty",
        aws=aws.TAG_VALUE,
        key_aws=aws.TAG_KEY,
    )
    data: DataConfig = setting(DataConfig())
    training: TrainingConfig = setting(TrainingConfig())
    serving: ServingConfig | None = setting(None, hint="null: no Serving stack in this environment")
    pruning: PruningConfig = setting(PruningConfig(), hint="enabled: false (default): no Pruning stack")
    network: NetworkConfig = setting(NetworkConfig(), hint="isolated: false (default): SageMaker's own network")
    deploy: DeployConfig | None = setting(None, hint="null: deploy.yml does not deploy this environment")
    rehearses: RehearsalConfig | None = setting(None, hint="what this environment does not rehearse of another")
    env_name: str = field(default="", init=False)
    source: str = field(default="", init=False)
    model: ModelLock | None = field(default=None, init=False)  # config/<env>.model.json: the served version
    base_model: BaseModel | None = field(default=None, init=False)  # config/models/: what training starts from

    def check(self, source: str, path: str) -> None:
        """Isolated mode: every setting that would need the internet fails here, one line each."""
        if self.training.neuron_compile.enabled and (self.serving is None or self.serving.spec.compile is None):
            backend = self.serving.backend if self.serving is not None else None
            raise ConfigError(
                source,
                "training.neuron_compile.enabled",
                f"got true with serving.backend {backend}; the compile step compiles for a serving profile that "
                "serves a compiled model (vllm_neuronx, lmi_neuronx): set a serving section or enabled: null",
            )
        step = self.serving.spec.compile if self.compiles_for_neuron else None
        host = self.training.neuron_compile.instance_type
        found = step.host_problem(self.serving, host) if step is not None else None
        if found is not None:
            raise ConfigError(source, *found)
        check_deploy_approval(self, source)
        if self.network.isolated:
            for name, problem in isolation_problems(self):
                raise ConfigError(source, name, problem)

    @property
    def serves(self) -> bool:
        """The Serving stack exists: a serving section and a served version (config/<env>.model.json)."""
        return self.serving is not None and self.serving.model_prefix is not None

    @property
    def compiles_for_neuron(self) -> bool:
        """The Training workflow runs the Neuron compile step (on by default for a backend that serves a compiled
        model: vllm_neuronx's export, lmi_neuronx's partition)."""
        enabled = self.training.neuron_compile.enabled
        serves_compiled = self.serving is not None and self.serving.spec.compile is not None
        return serves_compiled if enabled is None else enabled

    def stack_id(self, unit: str) -> str:
        """Stack ids follow `<app>-<env>-<Unit>` so every environment can live in one account."""
        return f"{self.app_name}-{self.env_name}-{unit}"

    def warnings(self) -> list[str]:
        """Legal but risky settings as `<file>: <field>: <problem>` lines; app.py prints them, synth goes on."""
        found = self.serving.warnings("serving") if self.serving is not None else []
        return [f"{self.source}: {line}" for line in found]

    @property
    def all_tags(self) -> Mapping[str, str]:
        return {"app": self.app_name, "environment": self.env_name, **self.tags}


_ISOLATED = "network.isolated: true"


def isolation_problems(config: AppConfig) -> list[tuple[str, str]]:
    """(field, problem) for each setting that cannot work without internet access."""
    training = config.training
    problems = []
    if training.base_model_key is None:
        problems.append(
            (
                "training.base_model_key",
                f"missing; {_ISOLATED} needs the base model as an S3 `model` "
                "channel (e.g. base-models/llama-2-7b-chat-hf/) instead of a hub download",
            )
        )
    model_id = training.hyperparameters.get("model_id")
    if is_hub_id(model_id):
        problems.append(
            (
                "training.hyperparameters.model_id",
                f"got {model_id!r}; a Hugging Face hub id needs the "
                f"internet ({_ISOLATED}): remove it, training.base_model_key supplies the model",
            )
        )
    if not training.has_own_image:
        problems.append(("training.image_uri", f"missing; {_ISOLATED}: {OFFLINE_IMAGE}"))
    if training.hub_token_secret is not None:
        problems.append(
            (
                "training.hub_token_secret",
                f"set; {_ISOLATED} jobs reach neither the hub nor Secrets Manager: remove it "
                "(training.base_model_key supplies the model)",
            )
        )
    for name in ("subnet_ids", "security_group_ids"):
        if getattr(training, name):
            problems.append(
                (f"training.{name}", f"set the VPC under network: ({_ISOLATED} uses it for training and serving)")
            )
    pruning = getattr(config, "pruning", None)  # the Pruning section is newer than this rule
    if pruning is not None and pruning.enabled:
        problems.append(
            (
                "pruning.enabled",
                f"got true; the Pruning stack downloads models from the Hugging Face hub, "
                f"which {_ISOLATED} cannot reach",
            )
        )
    return problems
