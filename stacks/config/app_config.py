"""The root of an environment's configuration: identity, placement and one section per stack."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from .data import DataConfig
from .schema import setting
from .serving import ServingConfig
from .training import TrainingConfig

ACCOUNT_PATTERN = r"\d{12}"
REGION_PATTERN = r"[a-z]{2}(-gov|-iso[a-z]?)?-[a-z]+-\d"


@dataclass(frozen=True)
class AppConfig:
    """One environment (dev, prod, ...). `env_name` and `source` come from the file, not its content."""

    app_name: str = setting("llm-inf2", pattern=r"[a-z][a-z0-9-]{1,23}", hint="lower-case, starts with a letter")
    account: str | None = setting(None, pattern=ACCOUNT_PATTERN, hint="12 digits, or null for any account")
    region: str | None = setting(None, pattern=REGION_PATTERN, hint="e.g. us-east-1, or null for any region")
    termination_protection: bool = setting(False)
    tags: dict[str, str] = setting({})
    data: DataConfig = setting(DataConfig())
    training: TrainingConfig = setting(TrainingConfig())
    serving: ServingConfig | None = setting(None, hint="null: no Serving stack in this environment")
    env_name: str = field(default="", init=False)
    source: str = field(default="", init=False)

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
