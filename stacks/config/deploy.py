"""How deploy.yml deploys an environment (its `deploy:` section), and the chain of every config/*.yaml's.

The chain is data, not workflow code: each environment names the one it deploys after, and deploy.yml runs
the environments in waves (every environment of a wave after every one of the wave before), so adding an
environment is adding its file. A file without a `deploy:` section (the emulator's local) is never deployed.
"""

from __future__ import annotations

from dataclasses import dataclass

from .errors import ConfigError
from .schema import setting

ENV_NAME_PATTERN = r"[a-z][a-z0-9]{0,15}"
# deploy.yml has one job per wave (wave-1 .. wave-4); tests/tools/test_workflows.py holds the two together.
MAX_WAVES = 4


@dataclass(frozen=True)
class DeployConfig:
    """The environment's place in deploy.yml's chain and what its deploy requires."""

    after: str | None = setting(
        None, pattern=ENV_NAME_PATTERN, hint="the environment deployed before this one; null: the first wave"
    )
    approval: bool = setting(
        False, hint="true: the GitHub environment must have required reviewers (deploy.yml checks it first)"
    )
    require_pinned: bool = setting(
        False,
        hint="true: deploys only with account and region set, and only with credentials of that account and region",
    )


@dataclass(frozen=True)
class Stage:
    """One environment in the chain: what deploy.yml's matrix gets."""

    name: str
    source: str
    wave: int
    deploy: DeployConfig
    account: str | None
    region: str | None

    @property
    def variable_suffix(self) -> str:
        """The suffix of its GitHub variables: AWS_REGION_<SUFFIX>, AWS_DIFF_ROLE_ARN_<SUFFIX>, ..."""
        return self.name.upper()

    def matrix_entry(self) -> dict:
        return {"name": self.name, "suffix": self.variable_suffix, "approval": self.deploy.approval}


def deploy_chain(configs: dict) -> list[list[Stage]]:
    """The waves of every config with a deploy section (`configs`: {env name: AppConfig}); ConfigError on a
    name that deploys nowhere, a cycle or a chain deeper than deploy.yml's waves."""
    deployed = {name: config for name, config in sorted(configs.items()) if config.deploy is not None}
    for config in deployed.values():
        after = config.deploy.after
        if after is None or after in deployed:
            continue
        known = ", ".join(deployed) or "none"
        why = (
            f"{config.source.rsplit('/', 1)[0]}/{after}.yaml has no deploy: section"
            if after in configs
            else "no such file"
        )
        raise ConfigError(config.source, "deploy.after", f"got {after!r}: {why}; environments deployed: {known}")
    waves: dict[str, int] = {}
    for name in deployed:
        _wave(name, deployed, waves, [])
    stages = [
        Stage(name, config.source, waves[name], config.deploy, config.account, config.region)
        for name, config in deployed.items()
    ]
    return [
        sorted((s for s in stages if s.wave == n), key=lambda s: s.name)
        for n in range(1, max(waves.values(), default=0) + 1)
    ]


def _wave(name: str, deployed: dict, waves: dict[str, int], path: list[str]) -> int:
    if name in waves:
        return waves[name]
    config = deployed[name]
    if name in path:
        cycle = " -> ".join([*path[path.index(name) :], name])
        raise ConfigError(config.source, "deploy.after", f"{cycle} is a cycle; the first environment has after: null")
    after = config.deploy.after
    wave = 1 if after is None else _wave(after, deployed, waves, [*path, name]) + 1
    if wave > MAX_WAVES:
        raise ConfigError(
            config.source,
            "deploy.after",
            f"got {after!r}: wave {wave}, deploy.yml runs {MAX_WAVES}; deploy {name} after an environment of an "
            "earlier wave, or add a wave job to .github/workflows/deploy.yml and raise MAX_WAVES "
            "(stacks/config/deploy.py)",
        )
    waves[name] = wave
    return wave
