"""LMI reads every `option.<x>` of serving.properties from the environment as `OPTION_<X>`: the endpoint in isolated
mode and the compile step pass the rendered properties that way, so the renaming must be LMI's own."""

from stacks.config.serving_properties import as_environment


def test_serving_properties_become_option_variables():
    text = (
        "# comment\nengine=Python\noption.entryPoint=djl_python.transformers_neuronx\noption.tensor_parallel_degree=2\n"
    )
    assert as_environment(text) == {
        "OPTION_ENGINE": "Python",
        "OPTION_ENTRYPOINT": "djl_python.transformers_neuronx",
        "OPTION_TENSOR_PARALLEL_DEGREE": "2",
    }
