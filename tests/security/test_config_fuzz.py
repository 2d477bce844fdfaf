"""Config fuzzing: random and mutated configurations through the real loader and entry point.

Every outcome must be either a successful synth (exit 0, templates written) or exit 2 with exactly
one `config error:` line on stderr; any exception escaping `app.main()` (a traceback) fails.
"""

from __future__ import annotations

import contextlib
import copy
import io
import os
import tempfile
from collections import Counter
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import app
from stacks.config import ConfigError, load_config
from tests.synth import ROOT, cli_context

pytestmark = pytest.mark.slow

EXAMPLES = 500
BASES = {env: yaml.safe_load((ROOT / "config" / f"{env}.yaml").read_text()) for env in ("dev", "prod")}


def _paths(node, prefix=()) -> list[tuple]:
    """Every key path of the nested mapping (mappings and leaves)."""
    found = []
    if isinstance(node, dict):
        for key, value in node.items():
            found.append((*prefix, key))
            found.extend(_paths(value, (*prefix, key)))
    return found


PATHS = sorted({p for base in BASES.values() for p in _paths(base)}, key=repr)


scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(10**7), 10**7),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=24),
    st.sampled_from(["", "ml.inf2.xlarge", "ml.g5.2xlarge", "../x", "s3://b/k", "0", "-1"]),
)
values = st.one_of(scalars, st.lists(scalars, max_size=3), st.dictionaries(st.text(max_size=8), scalars, max_size=3))


def _walk(config: dict, path: tuple) -> tuple[dict | None, object]:
    node = config
    for part in path[:-1]:
        if not isinstance(node, dict) or not isinstance(node.get(part), dict):
            return None, None
        node = node[part]
    return (node, path[-1]) if isinstance(node, dict) else (None, None)


def _mutate(config: dict, mutation: tuple) -> None:
    kind, path, *rest = mutation
    parent, key = _walk(config, path)
    if parent is None:
        return
    if kind == "set":
        parent[key] = rest[0]
    elif kind == "delete":
        parent.pop(key, None)
    elif kind == "add":
        target = parent.get(key) if isinstance(parent.get(key), dict) else parent
        target[rest[0]] = rest[1]
    elif kind == "copy":
        source_parent, source_key = _walk(config, rest[0])
        if source_parent is not None and source_key in source_parent:
            parent[key] = copy.deepcopy(source_parent[source_key])


_set = st.tuples(st.just("set"), st.sampled_from(PATHS), values)
# "set" dominates so most examples are invalid (each costs milliseconds); the rest still yield a steady
# share of valid configurations, each of which costs a full synth with cdk-nag.
mutations = st.one_of(
    _set,
    _set,
    _set,
    _set,
    st.tuples(st.just("delete"), st.sampled_from(PATHS)),
    st.tuples(st.just("add"), st.sampled_from(PATHS), st.text(min_size=1, max_size=16), values),
    st.tuples(st.just("copy"), st.sampled_from(PATHS), st.sampled_from(PATHS)),
)


@st.composite
def config_texts(draw) -> str:
    if draw(st.integers(0, 19)) == 0:  # 5 %: arbitrary text, including YAML that is not a mapping
        return draw(st.text(max_size=200))
    config = copy.deepcopy(BASES[draw(st.sampled_from(sorted(BASES)))])
    for mutation in draw(st.lists(mutations, min_size=3, max_size=5)):
        _mutate(config, mutation)
    return yaml.safe_dump(config, sort_keys=False, allow_unicode=True)


# The entry point's outcome on each configuration that loaded, by the loaded configuration (its file path left
# out): the synth depends on nothing else (no context or environment lookups below app.py; two synths are
# byte-identical, tests/test_app_determinism.py), so a text that loads equal to one already run (a mutation the
# loader normalizes away, an unknown key it ignores) has that run's outcome. Of the 500 examples 56 load, 14 distinct.
RUNS: dict[str, tuple[int, str, Path]] = {}


def _loaded(workdir: Path) -> str | None:
    """The configuration in workdir as the loader validates it, None where it fails to load (app.run says why)."""
    try:
        config = load_config("dev", workdir)
    except ConfigError:
        return None
    return repr(config).replace(config.source, "<file>")


def _run_entry_point(text: str) -> tuple[int, str, Path]:
    workdir = Path(tempfile.mkdtemp(prefix="fuzz-"))
    (workdir / "dev.yaml").write_text(text, encoding="utf-8")
    loaded = _loaded(workdir)
    if loaded in RUNS:
        return RUNS[loaded]
    context = {**cli_context(), "env": "dev", "config_dir": str(workdir)}
    stderr = io.StringIO()
    with contextlib.redirect_stderr(stderr):
        code = app.run(context, context=context, outdir=str(workdir / "cdk.out"))
    if loaded is not None:
        RUNS[loaded] = code, stderr.getvalue(), workdir / "cdk.out"
    return code, stderr.getvalue(), workdir / "cdk.out"


def _check_one(text: str) -> str:
    """The entry point on one config text: a synth or exactly one `config error:` line; returns which."""
    code, stderr, outdir = _run_entry_point(text)
    lines = [line for line in stderr.splitlines() if line.strip()]
    errors = [line for line in lines if line.startswith("config error: ")]
    others = [line for line in lines if not line.startswith(("config error: ", "config warning: "))]
    if code == 0:
        assert errors == [] and others == [], stderr
        assert list(outdir.glob("*.template.json")), "a successful synth writes templates"
        return "synth"
    assert code == 2, stderr
    assert len(errors) == 1 and others == [], stderr
    assert "Traceback" not in stderr
    return "config error"


def test_every_config_synthesizes_or_fails_with_one_line():
    """One test owns the whole run (xdist cannot split it) and checks that both outcomes occurred."""
    examples = int(os.environ.get("FUZZ_EXAMPLES", EXAMPLES))
    outcomes: Counter[str] = Counter()

    @settings(
        max_examples=examples,
        deadline=None,
        derandomize=True,
        database=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )
    @given(config_texts())
    def check(text):
        outcomes[_check_one(text)] += 1

    check()
    print(f"fuzz outcomes: {dict(outcomes)}; entry-point runs of configurations that load: {len(RUNS)}")
    assert sum(outcomes.values()) >= examples
    assert outcomes["synth"] >= 1 and outcomes["config error"] >= 1
