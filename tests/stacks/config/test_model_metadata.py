"""A model package's CustomerMetadataProperties back into typed facts: DescribeModelPackage returns that map with
every value a string (botocore's CustomerMetadataMap: string to string), so each count and shape must come back an
int and the chat-template switch a bool."""

from __future__ import annotations

import botocore.session
import pytest

from stacks.config import ConfigError
from stacks.config.aws_models import shapes
from stacks.config.model_lock import compiled_from_metadata, facts_from_metadata, parse_lock, read_lock
from tests.synth import lock_document

# TinyLlama-1.1B-Chat-v1.0's config.json and safetensors size, as the Training workflow registers them
METADATA = {
    "base_model": "TinyLlama/TinyLlama-1.1B-Chat-v1.0",
    "model_type": "llama",
    "architecture": "LlamaForCausalLM",
    "parameters": "1100048384",
    "size_bytes": "2200119864",
    "dtype": "bfloat16",
    "context_length": "2048",
    "num_attention_heads": "32",
    "num_key_value_heads": "4",
    "chat_template": "true",
}
COMPILED = {
    "compiled_tensor_parallel_degree": "2",
    "compiled_n_positions": "2048",
    "compiled_batch_size": "4",
    "compiled_dtype": "f16",
    "compiler_version": "2.15.141.0",
}


def test_the_metadata_map_holds_strings_only():
    shape = shapes("sagemaker")["CustomerMetadataMap"]
    assert shapes("sagemaker")[shape["value"]["shape"]]["type"] == "string"


def test_every_count_of_the_facts_comes_back_an_int():
    facts = facts_from_metadata(METADATA, "version")
    assert (facts.parameters, facts.size_bytes, facts.context_length) == (1100048384, 2200119864, 2048)
    assert (facts.num_attention_heads, facts.num_key_value_heads) == (32, 4)
    assert facts.chat_template is True


def test_the_compiled_shape_comes_back_typed():
    compiled = compiled_from_metadata({**METADATA, **COMPILED}, "version")
    assert (compiled.tensor_parallel_degree, compiled.n_positions, compiled.batch_size) == (2, 2048, 4)
    assert (compiled.dtype, compiled.compiler_version) == ("f16", "2.15.141.0")


def _refusal(call, *args) -> str:
    with pytest.raises(ConfigError) as caught:
        call(*args)
    return str(caught.value)


def test_a_version_without_one_fact_names_it_and_the_fix():
    metadata = {k: v for k, v in METADATA.items() if k != "dtype"}
    assert _refusal(facts_from_metadata, metadata, "version") == (
        "version: CustomerMetadataProperties.dtype: missing; the version records no model facts (registered before "
        "the Training workflow read them from the model's files): register it again with the current workflow"
    )


def test_a_fact_that_breaks_its_rule_is_named_under_the_metadata_map():
    assert _refusal(facts_from_metadata, {**METADATA, "model_type": "LLAMA"}, "version").startswith(
        "version: CustomerMetadataProperties.model_type: got 'LLAMA'; must match "
    )


def test_a_chat_template_of_false_comes_back_false():
    assert facts_from_metadata({**METADATA, "chat_template": "false"}, "version").chat_template is False


def test_a_chat_template_that_is_not_a_switch_fails_with_one_line():
    assert _refusal(facts_from_metadata, {**METADATA, "chat_template": "yes"}, "version") == (
        "version: CustomerMetadataProperties.chat_template: got 'yes'; expected true or false"
    )


def test_a_count_that_is_not_digits_fails_with_one_line():
    assert _refusal(facts_from_metadata, {**METADATA, "parameters": "1.1e9"}, "version") == (
        "version: CustomerMetadataProperties.parameters: got '1.1e9'; expected an integer"
    )


def test_a_compiled_version_missing_one_compiled_fact_names_it():
    metadata = {k: v for k, v in {**METADATA, **COMPILED}.items() if k != "compiled_batch_size"}
    assert _refusal(compiled_from_metadata, metadata, "version") == (
        "version: CustomerMetadataProperties.compiled_batch_size: missing beside the other compiled facts"
    )


def test_a_compiled_count_that_is_not_digits_is_a_config_error():
    metadata = {**METADATA, **COMPILED, "compiled_tensor_parallel_degree": "two"}
    assert _refusal(compiled_from_metadata, metadata, "version") == (
        "version: CustomerMetadataProperties.tensor_parallel_degree: got 'two'; expected an integer >= 1"
    )


def test_the_compiled_dtype_and_compiler_stay_text_even_as_digits():
    """Only the counts become ints: a digits-only compiler version fails its own pattern, not the type."""
    compiled = compiled_from_metadata({**METADATA, **COMPILED, "compiled_dtype": "16"}, "version")
    assert compiled.dtype == "16"
    assert _refusal(compiled_from_metadata, {**METADATA, **COMPILED, "compiler_version": "2"}, "version").startswith(
        "version: CustomerMetadataProperties.compiler_version: got '2'; must match "
    )


def test_an_unknown_approval_status_lists_the_ones_sagemaker_knows():
    statuses = botocore.session.get_session().get_service_model("sagemaker").shape_for("ModelApprovalStatus").enum
    lock = lock_document("dev", approval_status="Approve")
    assert _refusal(parse_lock, lock, "dev.model.json") == (
        f"dev.model.json: approval_status: got 'Approve'; allowed: {', '.join(statuses)}"
    )


def test_a_lock_that_is_not_utf8_fails_with_one_line(tmp_path):
    path = tmp_path / "dev.model.json"
    path.write_bytes(b'{"model_package_arn": "\xff"}')
    assert _refusal(read_lock, path) == f"{path.as_posix()}: <file>: not UTF-8 text"
