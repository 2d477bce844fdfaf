"""pruning.quantize: off by default, one-line error for an unknown method (the export job gets it as --quantize)."""

from __future__ import annotations

import pytest

from stacks.config import ConfigError, PruningConfig
from stacks.config.schema import parse


def test_quantize_defaults_to_none_and_takes_dynamic_int8():
    assert parse(PruningConfig, {}, source="dev.yaml", path="pruning").quantize == "none"
    assert parse(PruningConfig, {"quantize": "dynamic_int8"}, source="dev.yaml", path="pruning").quantize == (
        "dynamic_int8"
    )


def test_unknown_quantize_method_fails_with_one_line():
    with pytest.raises(ConfigError) as raised:
        parse(PruningConfig, {"quantize": "int4"}, source="dev.yaml", path="pruning")
    message = str(raised.value)
    assert "pruning.quantize: got 'int4'" in message and "\n" not in message
