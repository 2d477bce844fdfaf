"""stacks/config's reader of botocore's service models reads what botocore's own loader does, and the fields
named by the config resolve in them."""

from __future__ import annotations

import botocore.loaders
import pytest

from stacks.config import ConfigError, aws_limits
from stacks.config.aws_limits import AwsField, shape_of
from stacks.config.aws_models import service_model
from stacks.config.instance_types import ENDPOINT, TRAINING, check_instance_type

FIELDS = {name: f for name, f in vars(aws_limits).items() if isinstance(f, AwsField)}


@pytest.mark.parametrize("service", sorted({f.service for f in FIELDS.values()}))
def test_each_model_is_the_one_botocores_loader_reads(service):
    """Same newest API version, same extras merged (S3 ships service-2.sdk-extras.json)."""
    assert service_model(service) == botocore.loaders.Loader().load_service_model(service, "service-2")


@pytest.mark.parametrize("name", sorted(FIELDS))
def test_every_named_field_is_a_member_of_its_operations_request(name):
    """The label's first part is a member of the operation's input or a shape inside it (checked by walking)."""
    field = FIELDS[name]
    model = service_model(field.service)
    shapes = model["shapes"]
    request = model["operations"][field.operation]["input"]["shape"]
    first = field.path.split(".")[0]
    reachable, pending = set(), [request]
    while pending:
        shape = shapes[pending.pop()]
        for ref in [*(m["shape"] for m in shape.get("members", {}).values()), shape.get("member", {}).get("shape")]:
            if ref and ref not in reachable:
                reachable.add(ref)
                pending.append(ref)
    assert first in shapes[request]["members"] or first in reachable
    assert shape_of(field)["type"] in ("integer", "long", "double", "string", "list", "map")  # a map: its values


def test_a_shape_alone_is_no_field():
    with pytest.raises(KeyError) as caught:
        shape_of(AwsField("sagemaker", "CreateEndpointConfig", "ProductionVariant"))
    assert caught.value.args == ("ProductionVariant: name a member of ProductionVariant",)


def test_a_path_steps_through_lists_to_their_members():
    tag_key = service_model("sagemaker")["shapes"]["TagKey"]
    assert shape_of(AwsField("sagemaker", "CreateTrainingJob", "Tags.Key")) == tag_key
    assert shape_of(AwsField("sagemaker", "CreateTrainingJob", "Tags"))["type"] == "list"


def test_an_instance_type_nothing_resembles_gets_examples():
    enum = service_model("sagemaker")["shapes"][TRAINING]["enum"]
    with pytest.raises(ConfigError) as caught:
        check_instance_type("zzz", TRAINING, "dev.yaml", "training.instance_type")
    assert str(caught.value) == (
        "dev.yaml: training.instance_type: got 'zzz'; not a SageMaker TrainingInstanceType (botocore's model): "
        f"e.g. {', '.join(enum[:3])}"
    )
    check_instance_type(service_model("sagemaker")["shapes"][ENDPOINT]["enum"][0], ENDPOINT, "s", "f")


def test_extras_merge_into_nested_tables_and_add_new_entries():
    from stacks.config.aws_models import _merge

    model = {"shapes": {"Expires": {"type": "string", "documentation": "d"}}, "version": 1}
    _merge(model, {"shapes": {"Expires": {"type": "timestamp"}, "New": {"type": "integer"}}, "version": 2})
    assert model == {
        "shapes": {"Expires": {"type": "timestamp", "documentation": "d"}, "New": {"type": "integer"}},
        "version": 2,
    }
