"""Stateful resources keep their logical IDs: a refactor that would replace them fails here first.

A changed logical ID makes CloudFormation create a new key or bucket and orphan (retain) the old
one, i.e. the data silently moves out of the stack. Update this table only with a migration plan.
"""

from __future__ import annotations

import pytest

STATEFUL = {
    "Data": {
        "ArtifactKey8D84C5F0": "AWS::KMS::Key",
        "ArtifactBucket7410C9EF": "AWS::S3::Bucket",
        "AccessLogBucketDA470295": "AWS::S3::Bucket",
        "ModelPackageGroup": "AWS::SageMaker::ModelPackageGroup",  # the registry: every run's package versions
    },
    # Not data, but clients find the endpoint by its generated name: a renamed logical ID would create
    # a new endpoint under a new name and delete the one they call.
    "Serving": {
        "LlmHostingEndpointA9C42E40": "AWS::SageMaker::Endpoint",
    },
    # Isolated mode only (prod): the flow-log group is retained, so a new ID would orphan a year of flow logs.
    "Network": {
        "FlowLogs16C1943A": "AWS::Logs::LogGroup",
    },
}


@pytest.mark.parametrize("env", ["dev", "prod"])
@pytest.mark.parametrize("unit", sorted(STATEFUL))
def test_stateful_logical_ids_are_stable(templates, env, unit):
    if unit == "Network" and unit not in templates[env]:
        pytest.skip(f"{env} is not isolated: no Network stack")
    resources = templates[env][unit]["Resources"]
    for logical_id, resource_type in STATEFUL[unit].items():
        assert logical_id in resources, f"{unit}: {logical_id} ({resource_type}) renamed: it would be replaced"
        assert resources[logical_id]["Type"] == resource_type
    stateful_types = set(STATEFUL[unit].values())
    actual = {k for k, v in resources.items() if v["Type"] in stateful_types}
    assert actual == set(STATEFUL[unit]), "a new stateful resource needs an entry in this table"
