"""No import cycles anywhere in the repository, and the top-level packages layered one way.

The graph is read from the import statements of every tracked Python file (those inside functions too: a lazy
import still ties two modules together; not those under `if TYPE_CHECKING:`, which never run: a backend's
interface names the config types its methods take, and the config asks the backends). A training-code folder is a
SageMaker sourcedir, so its modules resolve against that folder first, as its entry scripts import them there.
Layering, lowest first: stacks/ (the CDK app), local/ (the embedded default: imports stacks/, never tools/),
tools/ (operator CLIs); training_code/ imports none of the three, since it runs inside a SageMaker container with
only its own folder.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.import_reader import imported_names, run_time_imported_names
from tests.synth import ROOT

SOURCEDIRS = sorted(p for p in (ROOT / "training_code").iterdir() if p.is_dir())
LAYERS = {"stacks": {"local", "tools"}, "local": {"tools"}}
APP_PACKAGES = {"stacks", "local", "tools"}


def _tracked_python() -> list[Path]:
    listed = subprocess.run(["git", "ls-files", "*.py"], cwd=ROOT, capture_output=True, text=True, check=True)
    return [ROOT / line for line in listed.stdout.split() if (ROOT / line).is_file()]


def _roots_for(path: Path) -> list[Path]:
    """Where `import x` looks for x: the sourcedir first for training code (and for tests/bench that import it)."""
    own = [d for d in SOURCEDIRS if d in path.parents]
    return own + [ROOT] + [d for d in SOURCEDIRS if d not in own]


def _module_file(name: str, roots: list[Path]) -> Path | None:
    parts = name.split(".")
    for root in roots:
        base = root.joinpath(*parts)
        for candidate in (base.with_suffix(".py"), base / "__init__.py"):
            if candidate.is_file():
                return candidate
    return None


def _imported_names(path: Path) -> list[str]:
    """Relative imports resolve inside the package below the sourcedir (training code) or the repository root."""
    sourcedir = next((d for d in SOURCEDIRS if d in path.parents), ROOT)
    return run_time_imported_names(path, sourcedir)


def _edges(path: Path) -> set[Path]:
    """The repository files `path` imports: the most specific module each name resolves to. `from pkg import sub`
    ties `path` to the submodule, not to pkg/__init__.py (Python has started pkg before any of its modules runs)."""
    roots = _roots_for(path)
    resolved = {name: _module_file(name, roots) for name in _imported_names(path)}
    modules = {name for name, target in resolved.items() if target is not None}
    return {
        target
        for name, target in resolved.items()
        if target is not None and target != path and not any(other.startswith(f"{name}.") for other in modules)
    }


def _graph() -> dict[Path, set[Path]]:
    return {path: _edges(path) for path in _tracked_python()}


def _cycles(graph: dict[Path, set[Path]]) -> list[list[Path]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[Path, int] = {}
    low: dict[Path, int] = {}
    stack: list[Path] = []
    on_stack: set[Path] = set()
    components = []
    for start in graph:
        if start in index:
            continue
        work = [(start, iter(sorted(graph.get(start, ()))))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    components.append(sorted(component))
    return components


def _top(path: Path) -> str:
    return path.relative_to(ROOT).parts[0]


@pytest.fixture(scope="module")
def graph():
    return _graph()


def test_no_import_cycles_anywhere(graph):
    cycles = [" <-> ".join(str(p.relative_to(ROOT)) for p in c) for c in _cycles(graph)]
    assert cycles == [], "import cycles:\n" + "\n".join(cycles)


def test_top_level_packages_import_only_downwards(graph):
    bad = [
        f"{path.relative_to(ROOT)} imports {target.relative_to(ROOT)}"
        for path, targets in graph.items()
        for target in targets
        if _top(target) in LAYERS.get(_top(path), set())
        or (_top(path) == "training_code" and _top(target) in APP_PACKAGES)
    ]
    assert bad == [], "\n".join(bad)


def test_tools_holds_only_operator_clis():
    """Every Python module in tools/ is a command: a module has a main guard, a package a __main__.py
    (`python -m tools.<name>`); the embedded default lives in local/."""
    not_clis = [
        str(p.relative_to(ROOT))
        for p in sorted((ROOT / "tools").glob("*.py"))
        if p.name != "__init__.py" and '__name__ == "__main__"' not in p.read_text(encoding="utf-8")
    ]
    packages = [p.parent for p in sorted((ROOT / "tools").glob("*/__init__.py"))]
    not_clis += [str(p.relative_to(ROOT)) for p in packages if not (p / "__main__.py").is_file()]
    assert not_clis == [] and packages


def test_the_cycle_finder_sees_a_cycle():
    """The cycle check can fail: a two-module cycle is one component, a module that only imports it is not in it."""
    a, b, c = (ROOT / f"{n}.py" for n in "abc")
    assert _cycles({a: {b}, b: {a}, c: {a}}) == [sorted([a, b])]
    assert _cycles({a: {b}, b: set(), c: {a}}) == []


def test_a_lazy_import_is_an_edge(graph):
    """The vLLM server imports local.demo inside a function (ask_merged_model): that still counts."""
    assert ROOT / "local" / "demo.py" in graph[ROOT / "local" / "servers" / "vllm_server.py"]


def test_an_annotation_only_import_is_not_an_edge(graph):
    """backend.py names ServingConfig under TYPE_CHECKING only; config/serving.py imports the backends."""
    backend = ROOT / "stacks" / "serving" / "backends" / "backend.py"
    assert ROOT / "stacks" / "config" / "serving.py" not in graph[backend]
    assert "stacks.config.serving" in imported_names(backend, ROOT)


def test_relative_imports_resolve_inside_their_package(graph):
    emulator = ROOT / "local" / "emulator"
    assert emulator / "job_runner.py" in graph[emulator / "emulator.py"]
    assert ROOT / "local" / "cloud_assembly.py" in graph[emulator / "emulator.py"]
    assert emulator / "emulator.py" in graph[emulator / "__init__.py"]  # a package's own relative imports count
    assert graph[emulator / "sagemaker_sync.py"] >= {emulator / "tuning.py", emulator / "job_runner.py"}
