"""cfn-lint is clean on every synthesized template. No rule is ignored."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ENVIRONMENTS


@pytest.mark.parametrize("env", ENVIRONMENTS)
def test_cfn_lint_clean(assemblies, env):
    paths = sorted(str(Path(assemblies[env].directory) / s.template_file) for s in assemblies[env].stacks)
    assert paths
    result = subprocess.run(
        [str(Path(sys.executable).parent / "cfn-lint"), "--format", "parseable", *paths],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
