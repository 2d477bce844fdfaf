"""A model package's CustomerMetadataProperties back into typed facts: DescribeModelPackage returns that map with
every value a string (botocore's CustomerMetadataMap: string to string), so each count and shape must come back an
int and the chat-template switch a bool."""

from __future__ import annotations

from stacks.config.aws_models import shapes
from stacks.config.model_lock import compiled_from_metadata, facts_from_metadata

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
