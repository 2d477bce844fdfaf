"""Compose the stacks of one environment into an App; app.py and the tests share this.

The one place that reads the whole config: it resolves the facts that cross sections (names, tags, region,
placement, job name prefixes) once, and hands each stack its own section and those facts, so a stack's signature
says everything it depends on.
"""

from __future__ import annotations

from typing import Any

from aws_cdk import App, Environment, Stack, Tags

from .config import AppConfig, ConfigError
from .data.stack import DataStack
from .nag import add_rule_packs
from .network.stack import NetworkStack
from .pruning.stack import PruningStack, pruning_prefix
from .serving.stack import ServingStack
from .shared.environment import EnvironmentFacts
from .shared.placement import Placement
from .shared.sagemaker_endpoint import allow_alarm_notifications
from .training.props import compile_facts, job_network, served_backend
from .training.stack import TrainingStack, job_name_prefix

StackOptions = dict[str, Any]  # what every stack of the environment is created with (env, protection, ...)


def environment_facts(config: AppConfig) -> EnvironmentFacts:
    """What every stack names, tags and refuses with: the config's identity, none of its sections."""
    return EnvironmentFacts(
        app_name=config.app_name,
        env_name=config.env_name,
        source=config.source,
        region=config.region,
        tags=config.all_tags,
    )


def build_app(app: App, config: AppConfig, *, nag: bool = True) -> dict[str, Stack]:
    """Add every stack of `config`'s environment to `app`; returns them by unit name."""
    environment = environment_facts(config)
    common: StackOptions = {
        "env": Environment(account=config.account, region=config.region),
        "analytics_reporting": False,
        "termination_protection": config.termination_protection,
    }
    data = DataStack(
        app,
        config.stack_id("Data"),
        data=config.data,
        environment_name=environment.name,
        description=f"{_title(config)}: KMS key and artifact bucket (stateful, retained)",
        **common,
    )
    stacks: dict[str, Stack] = {"Data": data}
    if config.serving is not None or config.pruning.enabled:
        # Endpoint alarms notify through topics under the Data key. Granted from the first deploy, while serving
        # may still be off, so turning it on adds the Serving stack without updating the key policy.
        allow_alarm_notifications(data.key)
    placement = _placement(app, config, environment, data, stacks, common)
    stacks["Training"] = _training_stack(app, config, environment, data, placement, common)
    if config.serves:  # serving.model_prefix null: nothing in the bucket to serve yet, no endpoint to fail
        stacks["Serving"] = _serving_stack(app, config, environment, data, placement, common)
    if config.pruning.enabled:
        stacks["Pruning"] = _pruning_stack(app, config, environment, data, common)
    for key, value in environment.tags.items():
        Tags.of(app).add(key, value)
    if nag:
        add_rule_packs(app)
    return stacks


def _title(config: AppConfig) -> str:
    """`<app> <env>`: how every stack's description starts, in the CloudFormation console's list."""
    return f"{config.app_name} {config.env_name}"


def _training_stack(
    app: App,
    config: AppConfig,
    environment: EnvironmentFacts,
    data: DataStack,
    placement: Placement | None,
    common: StackOptions,
) -> TrainingStack:
    """The facts the Training stack needs from other sections: where its jobs run (network), what a version is
    registered for and what the compile step runs (serving), the base's record (config/models/)."""
    serving = config.serving
    return TrainingStack(
        app,
        config.stack_id("Training"),
        training=config.training,
        environment=environment,
        job_name_prefix=job_name_prefix(config.training, environment),
        network=job_network(config.training, placement),
        served=served_backend(serving) if serving is not None else None,
        compile_step=compile_facts(serving, config.source) if config.compiles_for_neuron else None,
        base_model=config.base_model,
        bucket=data.bucket,
        key=data.key,
        model_package_group_name=data.model_package_group_name,
        description=f"{_title(config)}: QLoRA training on SageMaker, started by Step Functions on dataset uploads "
        "or on demand",
        **common,
    )


def _serving_stack(
    app: App,
    config: AppConfig,
    environment: EnvironmentFacts,
    data: DataStack,
    placement: Placement | None,
    common: StackOptions,
) -> ServingStack:
    """Only where `config.serves`: a serving section and a served version (config/<env>.model.json)."""
    serving = config.serving
    return ServingStack(
        app,
        config.stack_id("Serving"),
        serving=serving,
        environment=environment,
        bucket=data.bucket,
        key=data.key,
        placement=placement,
        description=f"{_title(config)}: {serving.model_name} on {serving.instance_type} ({serving.backend_label}), "
        "autoscaling, alarms, dashboard",
        **common,
    )


def _pruning_stack(
    app: App, config: AppConfig, environment: EnvironmentFacts, data: DataStack, common: StackOptions
) -> PruningStack:
    """Refused in isolated mode here, where the network section is read: the stack itself never sees it."""
    if config.network.isolated:
        raise ConfigError(
            config.source,
            "pruning.enabled",
            "the Pruning stack does not support network.isolated yet (its jobs and endpoints would run outside "
            "the VPC); keep pruning off in isolated environments",
        )
    return PruningStack(
        app,
        config.stack_id("Pruning"),
        pruning=config.pruning,
        environment=environment,
        job_name_prefix=pruning_prefix(config.pruning, environment),
        bucket=data.bucket,
        key=data.key,
        description=f"{_title(config)}: NAS pruning (super-network, tuning job, Pareto selection, export) and the "
        "base/pruned encoder endpoints",
        **common,
    )


def _placement(
    app: App,
    config: AppConfig,
    environment: EnvironmentFacts,
    data: DataStack,
    stacks: dict[str, Stack],
    common: StackOptions,
) -> Placement | None:
    """Isolated mode's subnets and security groups: from config, or from a Network stack created for them."""
    network = config.network
    if not network.isolated:
        return None
    if not (network.creates_vpc or network.creates_security_group):
        return Placement(subnet_ids=network.subnet_ids, security_group_ids=network.security_group_ids)
    stack = NetworkStack(
        app,
        config.stack_id("Network"),
        network=network,
        environment_name=environment.name,
        key=data.key,
        description=f"{_title(config)}: isolated mode: VPC without internet access, VPC endpoints, flow logs, "
        "SageMaker security group",
        **common,
    )
    stacks["Network"] = stack
    return stack.placement
