"""Shared fixtures: each environment is synthesized once per test session (jsii start-up is costly)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")

ENVIRONMENTS = ("dev", "prod", "staging")


@pytest.fixture(scope="session")
def assemblies(tmp_path_factory):
    """{env: CloudAssembly} synthesized with cdk-nag on; synth itself fails on any unacknowledged finding.
    Each environment serves (tests.synth.served: after docs/aws.md's first-deploy steps); the files as they
    ship, with nothing served yet, are `shipped_assemblies`."""
    from tests.synth import synth_served

    return {env: synth_served(env, tmp_path_factory.mktemp(f"cdk-{env}")) for env in ENVIRONMENTS}


@pytest.fixture(scope="session")
def shipped_assemblies(tmp_path_factory):
    """{env: CloudAssembly} of config/<env>.yaml as it ships: a first deploy into an empty account."""
    from tests.synth import synth_env

    return {env: synth_env(env, tmp_path_factory.mktemp(f"cdk-shipped-{env}")) for env in ENVIRONMENTS}


@pytest.fixture(scope="session")
def templates(assemblies):
    """{env: {unit: template dict}}."""
    from tests.synth import templates as by_unit

    return {env: by_unit(assembly) for env, assembly in assemblies.items()}
