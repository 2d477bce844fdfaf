"""What a pre-production environment does not rehearse of the one it stands in for, declared and kept true.

`rehearses:` in config/<env>.yaml names the environment it rehearses (e.g. staging -> prod) and lists under
`not_covered` each way the two differ (the serving backend, the model family, the compile path), each with its
reason. At load, the real differences of the two configs are computed; a difference not declared, or a
declared one that is not there, fails with one line, so the declaration cannot drift from the files.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from .errors import ConfigError
from .schema import setting
from .trained_model import model_family

if TYPE_CHECKING:
    from .app_config import AppConfig

Aspect = Literal["backend", "model_family", "compile_path", "hosting"]


@dataclass(frozen=True)
class NotCovered:
    """One way this environment differs from the one it rehearses, and why that is accepted."""

    aspect: Aspect = setting(hint="backend, model_family, compile_path or hosting")
    reason: str = setting(pattern=r"\S.{9,499}", hint="why the difference is accepted (10..500 characters)")


@dataclass(frozen=True)
class RehearsalConfig:
    environment: str = setting(pattern=r"[a-z][a-z0-9]{0,15}", hint="the environment this one rehearses, e.g. prod")
    not_covered: list[NotCovered] = setting([], hint="each way it differs from that environment, with the reason")


def compile_path(config: AppConfig) -> str:
    """How the served model gets its Neuron graph."""
    if config.compiles_for_neuron:
        program = config.serving.spec.compile.program
        return f"ahead of time by the Training workflow's compile step ({program})"
    backend = config.serving.backend if config.serving is not None else None
    return f"at container start-up by {backend} (or a precompiled graph the lock names)"


def hosting(config: AppConfig) -> str | None:
    """Where the served model runs: on the endpoint's variant, or as a component that scales to zero."""
    if config.serving is None:
        return None
    if config.serving.scale_to_zero.enabled:
        return "an inference component that scales to zero"
    return "a model on the endpoint's variant"


def aspects(config: AppConfig) -> dict[str, str | None]:
    serving = config.serving
    return {
        "backend": serving.backend if serving is not None else None,
        "model_family": model_family(config),
        "compile_path": compile_path(config),
        "hosting": hosting(config),
    }


def differences(config: AppConfig, other: AppConfig) -> dict[str, tuple[str | None, str | None]]:
    """{aspect: (this environment's, the other's)} where they differ."""
    mine, theirs = aspects(config), aspects(other)
    return {name: (mine[name], theirs[name]) for name in mine if mine[name] != theirs[name]}


def check_rehearsal(config: AppConfig, load: Callable[[str], AppConfig]) -> None:
    """`load(env_name)` is the other environment's config (its profile alone)."""
    rehearsal = config.rehearses
    if rehearsal is None:
        return
    if rehearsal.environment == config.env_name:
        raise ConfigError(
            config.source, "rehearses.environment", "names this environment itself: name the one it rehearses"
        )
    other = load(rehearsal.environment)
    real = differences(config, other)
    declared = [item.aspect for item in rehearsal.not_covered]
    for position, aspect in enumerate(declared):
        if aspect in declared[:position]:
            raise ConfigError(config.source, f"rehearses.not_covered[{position}].aspect", f"{aspect} is listed twice")
    for aspect, (mine, theirs) in real.items():
        if aspect not in declared:
            raise ConfigError(
                config.source,
                "rehearses.not_covered",
                f"{config.env_name} and {rehearsal.environment} differ in {aspect} ({mine} here, {theirs} in "
                f"{other.source}) but it is not declared: add {{aspect: {aspect}, reason: ...}}, or make them match",
            )
    for position, aspect in enumerate(declared):
        if aspect not in real:
            value = aspects(config)[aspect]
            raise ConfigError(
                config.source,
                f"rehearses.not_covered[{position}]",
                f"declares {aspect} not covered, but {config.env_name} and {rehearsal.environment} have the same "
                f"{aspect} ({value}): remove the entry",
            )
