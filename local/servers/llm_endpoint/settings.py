"""The stand-in's settings: serving.properties values, with an unrendered {{...}} value counting as unset."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from stacks.config.serving_properties import parse as parse_properties

DEFAULT_PROPERTIES = {"option.max_rolling_batch_size": "4", "option.n_positions": "2048", "option.dtype": "fp32"}
DTYPES = {"fp32": "float32", "fp16": "float16", "bf16": "bfloat16"}
_PLACEHOLDER = re.compile(r"\{\{.*?\}\}")


@dataclass(frozen=True)
class Settings:
    max_batch: int = 4
    n_positions: int = 2048
    dtype: str = "fp32"
    batch_window_s: float = 0.005  # how long an idle worker waits for companions of a first request

    @classmethod
    def from_properties(cls, props: dict[str, str], batch_window_s: float = 0.005) -> Settings:
        """Settings from serving.properties values; unrendered {{...}} values fall back to the defaults."""
        merged = dict(DEFAULT_PROPERTIES)
        merged.update({k: v for k, v in props.items() if not _PLACEHOLDER.search(v)})
        rolling = merged.get("option.rolling_batch", "auto").lower()
        key = "option.batch_size" if rolling == "disable" else "option.max_rolling_batch_size"
        max_batch = int(merged.get(key, merged["option.max_rolling_batch_size"]))
        n_positions = int(merged["option.n_positions"])
        dtype = merged["option.dtype"].lower()
        if max_batch < 1 or n_positions < 2 or dtype not in DTYPES:
            raise ValueError(f"bad settings: max batch {max_batch}, n_positions {n_positions}, dtype {dtype!r}")
        return cls(max_batch=max_batch, n_positions=n_positions, dtype=dtype, batch_window_s=batch_window_s)


def load_settings(properties: str | Path | None, overrides: list[str] | None = None, **kwargs: Any) -> Settings:
    props = parse_properties(Path(properties).read_text(encoding="utf-8"), str(properties)) if properties else {}
    for item in overrides or []:
        key, sep, value = item.partition("=")
        if not sep:
            raise ValueError(f"--set takes KEY=VALUE, got {item!r}")
        props[key.strip()] = value.strip()
    return Settings.from_properties(props, **kwargs)
