"""Container images per region from the committed table (stacks/images.json, see tools/refresh_images.py).

Stacks stay environment-agnostic: the table becomes a CfnMapping keyed by region, so one template
deploys in every listed region; a stack with a concrete region gets the literal URI.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from aws_cdk import Aws, CfnMapping, Stack, Token
from constructs import Construct

from ..config import ConfigError
from ..image_table import image_table, regions_for
from .environment import EnvironmentFacts

# Any partition's registry domain (amazonaws.com, .com.cn, c2s.ic.gov, sc2s.sgov.gov, cloud.adc-e.uk, ...).
ECR_URI = re.compile(r"(\d{12})\.dkr\.ecr\.([a-z0-9-]+)\.[a-z0-9.-]+?/([a-z0-9._/-]+)[:@][\w.:-]+")


def _key(name: str, part: str) -> str:
    return "".join(word.capitalize() for word in name.split("_")) + part


class ContainerImages(Construct):
    """A region -> image mapping for the named images, with URIs and ECR repository ARNs for grants."""

    def __init__(self, scope: Construct, construct_id: str, *, names: Sequence[str]) -> None:
        super().__init__(scope, construct_id)
        unknown = sorted(set(names) - set(image_table()))
        if unknown:
            raise KeyError(f"images not in stacks/images.json: {unknown}")
        self._names = tuple(sorted(set(names)))
        self.regions = regions_for(self._names)
        mapping: dict[str, dict[str, str]] = {}
        for region in self.regions:
            row = {}
            for name in self._names:
                uri = image_table()[name][region]
                account, _, repository = ECR_URI.fullmatch(uri).groups()
                row[_key(name, "Uri")] = uri
                row[_key(name, "Registry")] = account
                row[_key(name, "Repository")] = repository
            mapping[region] = row
        self._mapping = CfnMapping(self, "ByRegion", mapping=mapping, lazy=True)

    def _lookup(self, name: str, part: str) -> str:
        if name not in self._names:
            raise KeyError(f"image {name!r} was not requested by this stack ({self._names})")
        return self._mapping.find_in_map(Aws.REGION, _key(name, part))

    def uri(self, name: str, override: str | None = None) -> str:
        return override or self._lookup(name, "Uri")

    def repository_arn(self, name: str, override: str | None = None) -> str:
        """The ECR repository the execution role must be allowed to pull from."""
        stack = Stack.of(self)
        if override:
            account, region, repository = ECR_URI.fullmatch(override).groups()
        else:
            account, region, repository = (
                self._lookup(name, "Registry"),
                stack.region,
                self._lookup(name, "Repository"),
            )
        return stack.format_arn(
            service="ecr", account=account, region=region, resource="repository", resource_name=repository
        )

    def require_region(self, environment: EnvironmentFacts) -> None:
        """A concrete `region` without these images fails the synth (one line naming `region`); agnostic is fine."""
        region = environment.region
        if region is None or Token.is_unresolved(region) or region in self.regions:
            return
        problem = f"no container image for region {region!r}; supported: {', '.join(self.regions)}"
        raise ConfigError(environment.source, "region", problem)
