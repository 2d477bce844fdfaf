"""Shared fixtures: each environment is synthesized once per test session (jsii start-up is costly)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import botocore.loaders
import botocore.session
import pytest

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
from stacks.config.loader import deployed_environments  # noqa: E402
from stacks.jsii_kernel import kernel_node_options  # noqa: E402  (the project root is on sys.path from here)

# The pinned Node 24 (`make tools`) first, as make puts it for `make test`, also when pytest runs on its own: the
# jsii kernel of the in-process synths, the CDK CLI and the node tools the tests start.
TOOLS_BIN = ROOT / ".tools" / "bin"
if (TOOLS_BIN / "node").exists() and not os.environ.get("PATH", "").startswith(str(TOOLS_BIN) + os.pathsep):
    os.environ["PATH"] = str(TOOLS_BIN) + os.pathsep + os.environ.get("PATH", "")
# Two xdist workers share the two cores: one compute thread per torch process (tests, training jobs, servers)
# instead of one per core each, whose waits spun on the core the other worker needed (make test: 19.3 -> 16.3 CPU
# minutes, 10 min 48 s -> 9 min 7 s).
os.environ.setdefault("OMP_NUM_THREADS", "1")
kernel_node_options(os.environ)  # the in-process synths' jsii kernel gets the options app.py gives the CLI's


def _one_loader_per_data_path(session: botocore.session.Session) -> None:
    """Every botocore session of the test process reads the service models through one loader (botocore's own,
    its cache included): moto resets boto3's default session per test and the code under test opens sessions of
    its own, each of which re-read megabytes of the same JSON (539 loads, 15 s of one promotion module)."""

    def loader():
        data_path = session.get_config_variable("data_path")
        if data_path not in _LOADERS:
            _LOADERS[data_path] = botocore.loaders.create_loader(data_path)
        return _LOADERS[data_path]

    session._components.lazy_register_component("data_loader", loader)


_LOADERS: dict = {}
botocore.session.Session._register_data_loader = _one_loader_per_data_path

# Every environment deploy.yml deploys (a config/*.yaml with a deploy: section), synthesized once per session.
ENVIRONMENTS = tuple(sorted(deployed_environments(ROOT / "config")))


@pytest.hookimpl(tryfirst=True)
def pytest_xdist_make_scheduler(config, log):
    """`--dist loadgroup` with the tests that name no xdist_group kept together by module, as `--dist loadscope`
    does, so each module's fixtures are built once on one worker; units go out in collection order (which
    pytest_collection_modifyitems starts with the slow ones), not sorted by their number of tests."""
    if config.getoption("dist") != "loadgroup":
        return None
    from xdist.scheduler import LoadGroupScheduling

    class ByGroupThenModule(LoadGroupScheduling):
        def _split_scope(self, nodeid: str) -> str:
            scope = super()._split_scope(nodeid)
            return nodeid.split("::", 1)[0] if scope == nodeid else scope

    config.option.loadscopereorder = False
    return ByGroupThenModule(config, log)


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config, items):
    """On a `--dist loadgroup` worker: name each test's xdist_group in its node id, as pytest-xdist 3.8 does by
    appending `@group` to `item._nodeid`, which pytest 9.2's structured node ids no longer read
    (pytest-dev/pytest-xdist#1386: every group was spread over the workers, each building the group's fixtures);
    and put the slow tests first (a stable sort), so the longest units start first and none is left for the end."""
    if not getattr(config.option, "loadgroup", False):
        return
    from _pytest.nodeid import NodeId

    for item in items:
        marks = item.iter_markers("xdist_group")
        names = sorted({str(mark.args[0] if mark.args else mark.kwargs.get("name", "default")) for mark in marks})
        suffix = "@" + "_".join(names)
        if names and not item.nodeid.endswith(suffix):
            item._id = NodeId.parse(item.nodeid + suffix)
    items.sort(key=lambda item: item.get_closest_marker("slow") is None)


@pytest.fixture(scope="session")
def assemblies(tmp_path_factory):
    """{env: CloudAssembly} synthesized with cdk-nag on; synth itself fails on any unacknowledged finding.
    Each environment serves (tests.synth.served: after docs/aws.md's first-deploy steps); the files as they
    ship, with nothing served yet, are `shipped_assemblies`."""
    from tests.synth import served_assembly

    return {env: served_assembly(tmp_path_factory, env) for env in ENVIRONMENTS}


@pytest.fixture(scope="session")
def shipped_assemblies(tmp_path_factory):
    """{env: CloudAssembly} of config/<env>.yaml as it ships: a first deploy into an empty account."""
    from tests.synth import shipped_assembly

    return {env: shipped_assembly(tmp_path_factory, env) for env in ENVIRONMENTS}


@pytest.fixture(scope="session")
def templates(assemblies):
    """{env: {unit: template dict}}."""
    from tests.synth import templates as by_unit

    return {env: by_unit(assembly) for env, assembly in assemblies.items()}
