"""AWS Control Tower proactive controls (cfn-guard), evaluated only where they can find something.

`CfnGuardValidator` hands cfn-guard all 237 bundled rules for every template; each rule scans every resource of
every template, so the rules for services these stacks never use (RDS, EKS, Redshift, ...) cost most of the
plugin's time (about 3 of its 3.5 CPU seconds on dev). Every rule selects the resources it checks by type
(`Type == 'AWS::S3::Bucket'`, or a variable holding that string): a rule that names no type present in any
synthesized template checks nothing and cannot report a finding. This plugin reads the templates the synth
hands it, turns exactly those rules off (`disabled_rules`) and runs the same validator, so the report, its
plugin name and the acknowledgments' namespace stay those of `cdk-validator-cfnguard`.
"""

from __future__ import annotations

import importlib.util
import json
import re
import tarfile
from functools import cache
from pathlib import Path, PurePosixPath

import jsii
from aws_cdk import IPolicyValidationContextBeta1, IPolicyValidationPluginBeta1, PolicyValidationPluginReportBeta1
from cdklabs.cdk_validator_cfnguard import CfnGuardValidator

_RULES = "package/rules/control-tower/cfn-guard/"
_RESOURCE_TYPE = re.compile(r"[\"'](AWS::[A-Za-z0-9]+::[A-Za-z0-9]+)[\"']")


def _package_tarball() -> Path:
    """The plugin's jsii tarball, the same files the jsii kernel loads (found without importing the package)."""
    [cdklabs] = importlib.util.find_spec("cdklabs").submodule_search_locations
    [tarball] = (Path(cdklabs) / "cdk_validator_cfnguard" / "_jsii").glob("*.jsii.tgz")
    return tarball


@cache
def rule_types() -> dict[str, frozenset[str]]:
    """Rule name (the file stem `disabled_rules` takes) -> the resource types its file names."""
    found: dict[str, frozenset[str]] = {}
    with tarfile.open(_package_tarball(), "r:gz") as tar:
        for member in tar:
            if member.name.startswith(_RULES) and member.name.endswith(".guard"):
                text = tar.extractfile(member).read().decode("utf-8")
                found[PurePosixPath(member.name).stem] = frozenset(_RESOURCE_TYPE.findall(text))
    if not found or not all(found.values()):  # a rule that names no type could match anything: keep the plugin whole
        raise LookupError(f"cfn-guard rules without a resource type in {_package_tarball()}; cannot narrow them")
    return found


def template_types(template_paths: list[str]) -> set[str]:
    types: set[str] = set()
    for path in template_paths:
        resources = json.loads(Path(path).read_text(encoding="utf-8")).get("Resources", {})
        types.update(resource["Type"] for resource in resources.values())
    return types


def inapplicable_rules(template_paths: list[str]) -> list[str]:
    """Rules none of whose resource types occurs in the templates, sorted."""
    present = template_types(template_paths)
    return sorted(name for name, types in rule_types().items() if not types & present)


@jsii.implements(IPolicyValidationPluginBeta1)
class ControlTowerChecks:
    """`CfnGuardValidator()` (bundled Control Tower rules) minus the rules that cannot apply to the templates."""

    def __init__(self) -> None:
        self._all_rules = CfnGuardValidator()
        # Read the rules now: an error inside validate() only marks the plugin's report "failure" (the synth
        # goes on), while one raised here stops the synth.
        rule_types()

    @property
    def name(self) -> str:
        return self._all_rules.name

    @property
    def version(self) -> str | None:
        return self._all_rules.version

    @property
    def rule_ids(self) -> list[str] | None:
        return self._all_rules.rule_ids

    def validate(self, context: IPolicyValidationContextBeta1) -> PolicyValidationPluginReportBeta1:
        skipped = inapplicable_rules(list(context.template_paths))
        return CfnGuardValidator(disabled_rules=skipped).validate(context)
