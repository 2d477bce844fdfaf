"""Render the LMI NeuronX backend's one serving.properties template from the config.

The template (stacks/serving/backends/lmi_neuronx/serving.properties) serves every model: it holds
`key={{setting}}` lines, and a line whose setting is null is left out. The LMI keys serving.lmi has no setting
for come from serving.lmi.extra_properties, after the template's lines, each checked here like every other
setting. The rendered file is then checked against the config, so a value typed into the template by hand
cannot drift from `serving.lmi` in config/<env>.yaml. Pure Python: runs before aws_cdk is imported.
"""

from __future__ import annotations

import dataclasses
import difflib
import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from ..paths import LMI_PROPERTIES_TEMPLATE, relative
from .errors import ConfigError
from .schema import describe

if TYPE_CHECKING:
    from ..serving.backends.lmi_neuronx.config import LmiOptions

PROPERTIES = "serving.properties"
TEMPLATE = LMI_PROPERTIES_TEMPLATE
ENTRY_POINT = "djl_python.transformers_neuronx"
EXTRAS = "extra_properties"  # the serving.lmi field of the keys without a setting (no placeholder of its own)
_PLACEHOLDER = re.compile(r"\{\{\s*([a-z_]+)\s*\}\}")

# Set by the endpoint through the environment (OPTION_MODEL_ID, OPTION_COMPILED_GRAPH_PATH) from the
# pinned S3 prefixes; a line in serving.properties would silently win over the environment.
FROM_ENVIRONMENT = {
    "option.model_id": "serving.model_prefix (OPTION_MODEL_ID)",
    "option.s3url": "serving.model_prefix (OPTION_MODEL_ID)",
    "option.compiled_graph_path": "serving.compiled_graph_prefix (OPTION_COMPILED_GRAPH_PATH)",
}
FIXED = {"engine": "Python", "option.entryPoint": ENTRY_POINT}
# The keys LMI NeuronX 0.30.0 documents that serving.lmi has no setting for (djl-serving branch 0.30.0-dlc,
# serving/docs/lmi: deployment_guide/configurations.md's common table, user_guides/tnx_user_guide.md's advanced
# table, and option.enable_streaming in serving/docs/streaming.md).
EXTRA_KEYS = frozenset(
    {
        "option.trust_remote_code",
        "option.revision",
        "option.enable_streaming",
        "option.parallel_loading",
        "option.load_in_8bit",
        "option.unroll",
        "option.low_cpu_mem_usage",
        "option.enable_mixed_precision_accumulation",
        "option.enable_saturate_infinity",
        "option.attention_layout",
        "option.collectives_layout",
        "option.cache_layout",
        "option.on_device_embedding",
        "option.on_device_generation",
        "option.shard_over_sequence",
        "option.fuse_qkv",
        "option.qkv_tiling",
        "option.weight_tiling",
    }
)
# Documented too, but speculative decoding loads a second (draft) model from its own location, which the endpoint's
# role cannot read (it reads the pinned prefix only) and no workflow step trains or compiles.
DRAFT_MODEL_KEYS = frozenset(
    {"option.speculative_draft_model", "option.draft_model_compiled_path", "option.speculative_length"}
)


def format_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, tuple | list):
        return ",".join(str(v) for v in value)
    return str(value)


def typed_values(lmi: LmiOptions) -> dict[str, Any]:
    """serving.lmi's settings that fill the template's placeholders (every field but extra_properties)."""
    return {f.name: getattr(lmi, f.name) for f in dataclasses.fields(lmi) if f.name != EXTRAS}


def render(lmi: LmiOptions, *, source: str, path: str) -> str:
    """The serving.properties text for `lmi` (an LmiOptions); ConfigError on any mismatch."""
    where = relative(TEMPLATE)
    values = typed_values(lmi)
    lines: list[str] = []
    for number, line in enumerate(TEMPLATE.read_text(encoding="utf-8").splitlines(), start=1):
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
    extras = getattr(lmi, EXTRAS)
    check_extras(extras, values, source=source, path=path)
    lines += [f"{key}={format_value(value)}" for key, value in extras.items()]
    text = "\n".join(lines) + "\n"
    check(parse(text, where), values, set(extras), where)
    return text


def check_extras(extras: Mapping[str, Any], typed: Mapping[str, Any], *, source: str, path: str) -> None:
    """Each serving.lmi.extra_properties entry is a documented LMI key without a setting, on one line."""
    for key, value in extras.items():
        problem = _extra_problem(key, value, typed, path)
        if problem is not None:
            raise ConfigError(source, f"{path}.{EXTRAS}.{key}", problem)


def _extra_problem(key: str, value: Any, typed: Mapping[str, Any], path: str) -> str | None:
    name = key.removeprefix("option.")
    if key in FROM_ENVIRONMENT:
        owner = FROM_ENVIRONMENT[key]
        return f"set by the endpoint from {owner}, which a serving.properties line would override; remove it"
    if key in FIXED:
        return f"the template sets {key}={FIXED[key]}, which the LMI NeuronX container needs; remove it"
    if key.startswith("option.") and name in typed:
        return f"{path}.{name} is its setting; remove this entry and set {path}.{name}"
    if key in DRAFT_MODEL_KEYS:
        return (
            "speculative decoding loads a draft model from outside the pinned prefix, which the endpoint's role cannot "
            "read; remove it"
        )
    if key not in EXTRA_KEYS:
        close = difflib.get_close_matches(key, sorted(EXTRA_KEYS), n=1)
        guess = f"did you mean '{close[0]}'? " if close else ""
        allowed = ", ".join(sorted(EXTRA_KEYS))
        return f"not a key LMI NeuronX 0.30 documents without a setting of its own; {guess}allowed: {allowed}"
    if isinstance(value, str) and (not value.strip() or "\n" in value or "\r" in value):
        return (
            f"got {describe(value)}; a non-empty value on one line (a line break would add a serving.properties line)"
        )
    return None


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


def check(props: dict[str, str], values: dict[str, Any], extras: set[str], where: str) -> None:
    """The rendered file agrees with the config, carries the NeuronX entry point and no S3 locations; the template
    every model shares names no key of extra_properties."""
    for key, expected in FIXED.items():
        if props.get(key) != expected:
            raise ConfigError(where, key, f"got {props.get(key)!r}; the LMI NeuronX container needs {key}={expected}")
    for key, owner in FROM_ENVIRONMENT.items():
        if key in props:
            raise ConfigError(where, key, f"remove this line; it comes from {owner} and would override it")
    known = set(FIXED) | extras | {f"option.{name}" for name in values}
    for key in props:
        if key in EXTRA_KEYS and key not in extras:
            raise ConfigError(
                where, key, f"remove this line; the template serves every model: set it in serving.lmi.{EXTRAS}"
            )
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
