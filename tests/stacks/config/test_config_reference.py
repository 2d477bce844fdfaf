"""docs/configuration.md's settings reference is the schema's: defaults, limits, AWS fields and hints."""

from __future__ import annotations

from tools.config_reference import BEGIN, DOC, END, documented, render, replaced, rows


def test_the_settings_reference_in_the_docs_is_the_schemas():
    text = DOC.read_text(encoding="utf-8")
    assert text.count(BEGIN) == 1 and text.count(END) == 1
    assert replaced(text) == text, "run: python tools/config_reference.py --write"


def test_the_reference_has_a_row_per_setting_with_its_aws_field():
    table = {row[0]: row for row in rows()}
    assert table["serving.rollout.canary_percent"][1:4] == [
        "10",
        "1..50",
        "SageMaker CreateEndpoint TrafficRoutingConfig.CanarySize.Value: 1..50",
    ]
    assert table["training.max_runtime_hours"][2] == "1..672"
    assert table["serving"][1] == "null" and table["serving.model_name"][1] == "required"
    table_lines = [line for line in render().splitlines() if line.startswith("| ")]
    assert len(table_lines) == len(table) + 2  # the header and its rule


def test_documented_limits_are_listed_with_where_aws_says_them():
    lines = documented()
    runtime = "SageMaker CreateTrainingJob StoppingCondition.MaxRuntimeInSeconds: at most 2419200 ("
    assert any(line.startswith(f"- {runtime}https://docs.aws.amazon.com/") for line in lines), lines
    assert all(line.endswith(")") and "https://" in line for line in lines)
