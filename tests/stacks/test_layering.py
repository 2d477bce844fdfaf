"""The layering rule of stacks/__init__.py, read from the import statements of every module under stacks/."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.import_reader import imported_names, run_time_imported_names
from tests.synth import ROOT

STACKS = ROOT / "stacks"
UNITS = ("data", "network", "training", "serving", "pruning")
STDLIB_ONLY = ("paths.py", "image_table.py", "jsii_kernel.py", "code_contract")


def _imports(path: Path) -> list[str]:
    """Every module (and name) `path` imports, relative imports resolved to `stacks.<...>` names."""
    return imported_names(path, ROOT)


def _modules(*parts: str) -> list[Path]:
    root = STACKS.joinpath(*parts)
    return [root] if root.is_file() else sorted(root.rglob("*.py"))


@pytest.mark.parametrize("part", STDLIB_ONLY)
def test_contract_paths_and_image_table_use_the_standard_library_only(part):
    for path in _modules(part):
        third_party = [m for m in _imports(path) if m.split(".")[0] not in sys.stdlib_module_names | {"stacks"}]
        assert third_party == [], f"{path.relative_to(ROOT)} imports {third_party}"
        stacks_imports = [m for m in _imports(path) if m.startswith("stacks.")]
        assert all(m.startswith(("stacks.paths", "stacks.code_contract")) for m in stacks_imports), path


CDK_FREE_BACKENDS = "stacks.serving.backends"  # the backend registry and records: the config schema reads them


def test_config_imports_no_construct_or_stack_module():
    for path in _modules("config"):
        bad = [
            m
            for m in _imports(path)
            if not m.startswith(CDK_FREE_BACKENDS)
            and m.startswith(
                (
                    "aws_cdk",
                    "constructs",
                    "stacks.shared",
                    "stacks.nag",
                    "stacks.application",
                    *(f"stacks.{u}" for u in UNITS),
                )
            )
        ]
        assert bad == [], f"{path.relative_to(ROOT)} imports {bad}"


def _run_time_imports(path: Path) -> list[str]:
    """What importing a backend module imports: its `endpoint()` method imports the construct when a stack asks."""
    return run_time_imported_names(path, ROOT, deferred_functions=("endpoint",))


def test_a_backend_imports_aws_cdk_only_in_its_endpoint_module():
    """Config validation imports every backend's record, config, contract and compile program: they stay
    CDK-free; the record names its construct in annotations and imports it only when `endpoint()` is called."""
    cdk = ("aws_cdk", "constructs", "stacks.shared", "stacks.nag", "stacks.application", "stacks.serving.stack")
    modules = [p for p in _modules("serving", "backends") if p.name != "endpoint.py"]
    assert len(modules) >= 7, modules  # the registry, and a record, config and contract per backend
    for path in modules:
        bad = [m for m in _run_time_imports(path) if m.startswith(cdk) or m.endswith(".endpoint")]
        assert bad == [], f"{path.relative_to(ROOT)} imports {bad}"


def test_the_run_time_import_reader_skips_annotations_and_the_endpoint_method():
    found = _run_time_imports(STACKS / "serving" / "backends" / "vllm_neuronx" / "__init__.py")
    assert "stacks.serving.backends.vllm_neuronx.config" in found
    assert not [m for m in found if m.endswith(".endpoint") or m.startswith("stacks.config.serving")]
    every = _imports(STACKS / "serving" / "backends" / "vllm_neuronx" / "__init__.py")
    assert "stacks.serving.backends.vllm_neuronx.endpoint" in every and "stacks.config.serving" in every


def test_shared_pieces_import_no_unit():
    for path in _modules("shared"):
        bad = [m for m in _imports(path) if m.startswith(tuple(f"stacks.{u}" for u in UNITS))]
        assert bad == [], f"{path.relative_to(ROOT)} imports {bad}"


@pytest.mark.parametrize("unit", UNITS)
def test_a_unit_imports_no_other_unit(unit):
    others = tuple(f"stacks.{u}" for u in UNITS if u != unit)
    for path in _modules(unit):
        bad = [m for m in _imports(path) if m.startswith(others)]
        assert bad == [], f"{path.relative_to(ROOT)} imports {bad}"


def test_config_validation_runs_without_aws_cdk():
    """app.py validates before importing aws_cdk; the config package must not pull it in."""
    code = "import sys, stacks.config; stacks.config.load_config('prod'); print('aws_cdk' in sys.modules)"
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "False"


def test_the_import_reader_resolves_relative_imports():
    imports = _imports(STACKS / "training" / "stack.py")
    assert "stacks.shared.job_role" in imports and "stacks.training.workflow" in imports
