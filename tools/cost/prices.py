"""The committed price table (tools/prices.json): on-demand prices by region and usage, never guessed."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
PRICES = ROOT / "tools" / "prices.json"


class UnpricedError(Exception):
    """An instance type the table has no price for (one line)."""


class PriceTable:
    """Prices and the assumptions printed beside them (as-of date, hours per month, the spot saving)."""

    def __init__(self, data: dict[str, Any], path: Path = PRICES):
        self.data = data
        self.path = path
        self.as_of: str = data["as_of"]
        self.hours_per_month: float = float(data["hours_per_month"])
        self.spot_savings: float = float(data["managed_spot_savings"]["fraction"])
        self.spot_label: str = data["managed_spot_savings"]["label"]
        self.default_region: str = data["default_region"]
        self.recheck: str = data["recheck"]
        self.vpce: dict[str, Any] = data.get("vpc_interface_endpoint", {})

    @classmethod
    def load(cls, path: Path = PRICES) -> PriceTable:
        return cls(json.loads(Path(path).read_text(encoding="utf-8")), Path(path))

    def region_for(self, region: str | None) -> tuple[str, str]:
        """The region to price in, and a note when the stacks pin none."""
        if region is None or region.startswith("unknown"):
            return self.default_region, f"region not pinned; priced as {self.default_region}"
        return region, ""

    def _shown_path(self) -> str:
        try:
            return self.path.relative_to(ROOT).as_posix()
        except ValueError:
            return self.path.name

    def price(self, usage: str, region: str, instance_type: str, where: str) -> float:
        """USD per instance-hour of a SageMaker usage (inference, training, processing)."""
        table = self.data["regions"].get(region, {}).get(usage, {})
        if instance_type not in table:
            raise UnpricedError(
                f"{instance_type} ({where}) has no SageMaker {usage} price for {region} in {self._shown_path()} "
                f"(as of {self.as_of}); add it there with its source instead of guessing"
            )
        return float(table[instance_type])

    def eni_price(self, region: str, where: str) -> float:
        """USD per interface-endpoint-AZ-hour (one ENI each)."""
        prices = self.vpce.get("usd_per_az_hour", {})
        if region not in prices:
            raise UnpricedError(
                f"interface VPC endpoints ({where}) have no price for {region} in tools/prices.json "
                "(vpc_interface_endpoint); add it there with its source instead of guessing"
            )
        return float(prices[region])
