"""The facts of one environment that every stack names, tags and refuses with, resolved once by build_app.

A stack takes its own config section and these, never the config's root: what a construct depends on is then
what its signature says. stacks/application.py builds the one `EnvironmentFacts` of a synth.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass


@dataclass(frozen=True)
class EnvironmentFacts:
    """`source` is the config file a refusal names; `region` None: the templates deploy in any listed region."""

    app_name: str
    env_name: str
    source: str
    region: str | None
    tags: Mapping[str, str]

    @property
    def name(self) -> str:
        """`<app>-<env>`: the default job name prefix and the start of every resource description."""
        return f"{self.app_name}-{self.env_name}"
