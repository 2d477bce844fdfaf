"""Settings of isolated mode: training and serving in a VPC without internet, with network isolation on."""

from __future__ import annotations

from dataclasses import dataclass

from . import aws_limits as aws
from .errors import ConfigError
from .schema import setting


@dataclass(frozen=True)
class NetworkConfig:
    """`isolated: true` puts the jobs and models in a VPC: the one given here, or one the Network stack creates."""

    isolated: bool = setting(False, hint="true: VPC, no internet, EnableNetworkIsolation (README, Isolated mode)")
    vpc_id: str | None = setting(None, pattern=r"vpc-[0-9a-f]{8,17}", hint="null: the Network stack creates one")
    # Both go to the jobs' and the models' VpcConfig (one shape: the model's names it).
    subnet_ids: list[str] = setting([], pattern=r"subnet-[0-9a-f]{8,17}", aws=aws.MODEL_SUBNETS)
    security_group_ids: list[str] = setting(
        [],
        pattern=r"sg-[0-9a-f]{8,17}",
        hint="empty: the Network stack creates one in the VPC",
        aws=aws.MODEL_SECURITY_GROUPS,
    )
    s3_prefix_list_id: str | None = setting(
        None, pattern=r"pl-[0-9a-f]{8,17}", hint="S3's prefix list in the region; null: HTTPS to 0.0.0.0/0"
    )

    def check(self, source: str, path: str) -> None:
        def fail(name: str, problem: str) -> None:
            raise ConfigError(source, f"{path}.{name}" if path else name, problem)

        if not self.isolated:
            for name in ("vpc_id", "subnet_ids", "security_group_ids", "s3_prefix_list_id"):
                if getattr(self, name):
                    fail(name, "only used with isolated: true; remove it or set isolated: true")
            return
        if self.vpc_id is None:
            if self.subnet_ids or self.security_group_ids:
                name = "subnet_ids" if self.subnet_ids else "security_group_ids"
                fail(name, "needs vpc_id (the VPC they belong to); null vpc_id: the Network stack creates the VPC")
            return
        if len(self.subnet_ids) < 2:
            fail(
                "subnet_ids",
                f"got {len(self.subnet_ids)}; an existing VPC needs at least 2 private subnets (different AZs)",
            )
        if len(set(self.subnet_ids)) != len(self.subnet_ids):
            fail("subnet_ids", "lists a subnet twice")

    @property
    def creates_vpc(self) -> bool:
        return self.isolated and self.vpc_id is None

    @property
    def creates_security_group(self) -> bool:
        return self.isolated and not self.security_group_ids
