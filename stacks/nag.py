"""cdk-nag rule packs (AwsSolutions, HIPAA, NIST 800-53 R5) and the Control Tower proactive controls, on every synth.

Accepted findings are acknowledged where their resource is made (stacks/shared/acknowledgments.py), with the
reason a security reviewer would accept; an unacknowledged finding fails the synth.
"""

from __future__ import annotations

from aws_cdk import App, Validations
from cdk_nag import AwsSolutionsChecks, HIPAASecurityChecks, NIST80053R5Checks

from .control_tower import ControlTowerChecks

RULE_PACKS = (AwsSolutionsChecks, HIPAASecurityChecks, NIST80053R5Checks)


def add_rule_packs(app: App) -> None:
    """Run every pack at synth, and the AWS Control Tower proactive controls (cfn-guard, offline; the rules
    that can match a resource of the templates); an unacknowledged finding makes `app.synth()` fail."""
    Validations.of(app).add_plugins(*(pack(app) for pack in RULE_PACKS), ControlTowerChecks())
