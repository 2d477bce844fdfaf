"""Render `serving_artifacts/<model>/serving.properties` from its committed template and the config.

The template holds `key={{setting}}` lines; a line whose setting is null is left out. The rendered
file is then checked against the config, so a value typed into the template by hand cannot drift
from `serving.lmi` in config/<env>.yaml. Pure Python: runs before aws_cdk is imported.
"""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path
from typing import Any

from ..paths import SERVING_ARTIFACTS, relative
from .errors import ConfigError

PROPERTIES = "serving.properties"
ENTRY_POINT = "djl_python.transformers_neuronx"
_PLACEHOLDER = re.compile(r"\{\{\s*([a-z_]+)\s*\}\}")

# Set by the endpoint through the environment (OPTION_MODEL_ID, OPTION_COMPILED_GRAPH_PATH) from the
# pinned S3 prefixes; a line in serving.properties would silently win over the environment.
FROM_ENVIRONMENT = {
    "option.model_id": "serving.model_prefix (OPTION_MODEL_ID)",
    "option.s3url": "serving.model_prefix (OPTION_MODEL_ID)",
    "option.compiled_graph_path": "serving.compiled_graph_prefix (OPTION_COMPILED_GRAPH_PATH)",
}
FIXED = {"engine": "Python", "option.entryPoint": ENTRY_POINT}
EXTRA_KEYS = {"option.trust_remote_code", "option.revision", "option.enable_streaming"}


def template_path(model_name: str) -> Path:
    return SERVING_ARTIFACTS / model_name / PROPERTIES


def format_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, tuple | list):
        return ",".join(str(v) for v in value)
    return str(value)


def render(model_name: str, lmi: Any, *, source: str, path: str) -> str:
    """The serving.properties text for `lmi` (an LmiOptions); ConfigError on any mismatch."""
    template = template_path(model_name)
    where = relative(template)
    if not template.is_file():
        raise ConfigError(source, f"{path}.model_name", f"got {model_name!r}; no template at {where}")
    values = {f.name: getattr(lmi, f.name) for f in dataclasses.fields(lmi)}
    lines: list[str] = []
    for number, line in enumerate(template.read_text(encoding="utf-8").splitlines(), start=1):
        if line.lstrip().startswith(("#", "!")):
            lines.append(line)  # comments ship verbatim
            continue
        names = _PLACEHOLDER.findall(line)
        unknown = [n for n in names if n not in values]
        if unknown:
            raise ConfigError(
                where, f"line {number}", f"unknown placeholder {{{{{unknown[0]}}}}}; known: {', '.join(sorted(values))}"
            )
        if any(values[n] is None for n in names):
            continue  # a null setting drops its line: LMI's own default applies
        lines.append(_PLACEHOLDER.sub(lambda m: format_value(values[m.group(1)]), line))
    text = "\n".join(lines) + "\n"
    check(parse(text, where), values, where)
    return text


def parse(text: str, where: str = PROPERTIES) -> dict[str, str]:
    """Java-properties style `key=value` lines (`#`/`!` comments, blank lines skipped); the one reader of
    serving.properties for the stacks and local/servers/llm_endpoint. A line without `=` or a key set twice fails."""
    props: dict[str, str] = {}
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith(("#", "!")):
            continue
        if "=" not in line:
            raise ConfigError(where, f"line {number}", f"got {line!r}; expected key=value")
        key, value = (part.strip() for part in line.split("=", 1))
        if key in props:
            raise ConfigError(where, key, "set twice")
        props[key] = value
    return props


def check(props: dict[str, str], values: dict[str, Any], where: str) -> None:
    """The rendered file agrees with the config, carries the NeuronX entry point and no S3 locations."""
    for key, expected in FIXED.items():
        if props.get(key) != expected:
            raise ConfigError(where, key, f"got {props.get(key)!r}; the LMI NeuronX container needs {key}={expected}")
    for key, owner in FROM_ENVIRONMENT.items():
        if key in props:
            raise ConfigError(where, key, f"remove this line; it comes from {owner} and would override it")
    known = set(FIXED) | EXTRA_KEYS | {f"option.{name}" for name in values}
    for key in props:
        if key not in known:
            raise ConfigError(where, key, f"unknown key; known: {', '.join(sorted(known))}")
    for name, value in values.items():
        key = f"option.{name}"
        if value is None:
            if key in props:
                raise ConfigError(
                    where, key, f"got {props[key]!r} but serving.lmi.{name} is null; write {key}={{{{{name}}}}}"
                )
        elif key not in props:
            raise ConfigError(where, key, f"missing; serving.lmi.{name} is set: add {key}={{{{{name}}}}}")
        elif props[key] != format_value(value):
            raise ConfigError(
                where,
                key,
                f"got {props[key]!r} but serving.lmi.{name} is {format_value(value)!r}; write {key}={{{{{name}}}}}",
            )


def as_environment(properties: str) -> dict[str, str]:
    """serving.properties as LMI's environment form: option.tensor_parallel_degree -> OPTION_TENSOR_PARALLEL_DEGREE,
    engine -> OPTION_ENGINE, option.entryPoint -> OPTION_ENTRYPOINT (the endpoint in isolated mode, where no
    tarball ships, and the compile step's partition, which reads OPTION_* the same way)."""
    environment = {}
    for key, value in parse(properties, PROPERTIES).items():
        name = key.removeprefix("option.")
        environment["OPTION_" + name.replace(".", "_").upper()] = value
    return environment
