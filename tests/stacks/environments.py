"""Every environment of config/*.yaml, synthesized once per session: conftest's dev/prod/staging, the others here."""

from __future__ import annotations

from tests.synth import ROOT

ALL_ENVIRONMENTS = tuple(sorted(path.stem for path in (ROOT / "config").glob("*.yaml")))
_EXTRA: dict[str, dict[str, dict]] = {}


def all_templates(templates: dict, tmp_path_factory) -> dict[str, dict[str, dict]]:
    """{env: {unit: template}} for ALL_ENVIRONMENTS, reusing the session's `templates` fixture."""
    from tests.synth import shipped_assembly
    from tests.synth import templates as by_unit

    for env in ALL_ENVIRONMENTS:
        if env not in templates and env not in _EXTRA:
            _EXTRA[env] = by_unit(shipped_assembly(tmp_path_factory, env))
    return {env: templates[env] if env in templates else _EXTRA[env] for env in ALL_ENVIRONMENTS}
