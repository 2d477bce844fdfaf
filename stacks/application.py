"""Compose the stacks of one environment into an App; app.py and the tests share this."""

from __future__ import annotations

from aws_cdk import App, Environment, Stack, Tags

from .config import AppConfig
from .data.stack import DataStack
from .nag import add_rule_packs
from .network.stack import NetworkStack
from .pruning.stack import PruningStack
from .serving.stack import ServingStack
from .shared.placement import Placement
from .shared.sagemaker_endpoint import allow_alarm_notifications
from .training.stack import TrainingStack


def build_app(app: App, config: AppConfig, *, nag: bool = True) -> dict[str, Stack]:
    """Add every stack of `config`'s environment to `app`; returns them by unit name."""
    env = Environment(account=config.account, region=config.region)
    common = {
        "env": env,
        "analytics_reporting": False,
    }
    data = DataStack(
        app,
        config.stack_id("Data"),
        config=config,
        termination_protection=config.termination_protection,
        description=f"{config.app_name} {config.env_name}: KMS key and artifact bucket (stateful, retained)",
        **common,
    )
    stacks: dict[str, Stack] = {"Data": data}
    if config.serving is not None or config.pruning.enabled:
        # Endpoint alarms notify through topics under the Data key. Granted from the first deploy, while serving
        # may still be off, so turning it on adds the Serving stack without updating the key policy.
        allow_alarm_notifications(data.key)
    placement = _placement(app, config, data, stacks, common)
    stacks["Training"] = TrainingStack(
        app,
        config.stack_id("Training"),
        config=config,
        bucket=data.bucket,
        key=data.key,
        model_package_group_name=data.model_package_group_name,
        placement=placement,
        termination_protection=config.termination_protection,
        description=f"{config.app_name} {config.env_name}: QLoRA training on SageMaker, started by Step Functions "
        "on dataset uploads or on demand",
        **common,
    )
    if config.serves:  # serving.model_prefix null: nothing in the bucket to serve yet, no endpoint to fail
        stacks["Serving"] = ServingStack(
            app,
            config.stack_id("Serving"),
            config=config,
            bucket=data.bucket,
            key=data.key,
            placement=placement,
            termination_protection=config.termination_protection,
            description=f"{config.app_name} {config.env_name}: {config.serving.model_name} on "
            f"{config.serving.instance_type} ({config.serving.backend_label}), autoscaling, alarms, dashboard",
            **common,
        )
    if config.pruning.enabled:
        stacks["Pruning"] = PruningStack(
            app,
            config.stack_id("Pruning"),
            config=config,
            bucket=data.bucket,
            key=data.key,
            termination_protection=config.termination_protection,
            description=f"{config.app_name} {config.env_name}: NAS pruning (super-network, tuning job, Pareto "
            "selection, export) and the base/pruned encoder endpoints",
            **common,
        )
    for key, value in config.all_tags.items():
        Tags.of(app).add(key, value)
    if nag:
        add_rule_packs(app)
    return stacks


def _placement(
    app: App, config: AppConfig, data: DataStack, stacks: dict[str, Stack], common: dict
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
        config=config,
        key=data.key,
        termination_protection=config.termination_protection,
        description=f"{config.app_name} {config.env_name}: isolated mode: VPC without internet access, VPC "
        "endpoints, flow logs, SageMaker security group",
        **common,
    )
    stacks["Network"] = stack
    return stack.placement
