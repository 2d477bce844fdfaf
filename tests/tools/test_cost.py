"""Cost figures from synthesized templates and the committed price table: every endpoint, every job state."""

from __future__ import annotations

import copy
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from local.cloud_assembly import CloudAssemblyReader
from tests.synth import ROOT
from tools import cost


@pytest.fixture(scope="module")
def table():
    return cost.PriceTable.load()


def _lines(assemblies, env_name, table):
    stacks = CloudAssemblyReader(assemblies[env_name].directory).by_name()
    [result] = cost.estimate_stacks(stacks, table)
    return result, {line.key: line for line in result.lines}


def test_price_table_is_dated_sourced_and_says_what_is_assumed(table):
    data = json.loads(cost.PRICES.read_text())
    assert data["as_of"] and "Price List API" in data["source"] and data["currency"] == "USD"
    assert "before a budget decision" in data["recheck"]
    assert "up to 90%" in data["managed_spot_savings"]["note"] and "assum" in table.spot_label
    us = data["regions"]["us-east-1"]
    # SageMaker real-time inference, not the EC2 inf2 prices the table once had
    assert {k: v for k, v in us["inference"].items() if k.startswith("ml.inf2.")} == {
        "ml.inf2.xlarge": 0.99,
        "ml.inf2.8xlarge": 2.36,
        "ml.inf2.24xlarge": 7.79,
        "ml.inf2.48xlarge": 15.58,
    }
    assert not any(k.startswith("ml.inf2.") for k in us["training"])  # not offered for training
    assert not any(k.startswith("ml.trn1.") for k in us["inference"])


@pytest.mark.parametrize("env_name", ["dev", "prod"])
def test_every_default_type_is_priced(assemblies, table, env_name):
    result, _ = _lines(assemblies, env_name, table)
    assert result.problems == [] and result.region == "us-east-1" and "not pinned" in result.region_note


def test_dev_prices_every_stack_endpoint_and_every_job(assemblies, table):
    result, lines = _lines(assemblies, "dev", table)
    endpoints = {
        key: (line.instance_type, line.count, round(line.usd_total, 2))
        for key, line in lines.items()
        if key.startswith("endpoint ")
    }
    pruning = [key for key in endpoints if "Pruning/" in key]
    assert len(pruning) == 4  # base and pruned, always on, at min and max
    assert all(endpoints[key][0] == "ml.c5.xlarge" for key in pruning)
    serving = next(key for key in endpoints if "Serving/" in key and key.endswith("@min"))
    # dev scales to zero: nothing while idle, the instance-hour price while a copy runs, 2 instances at max
    assert endpoints[serving] == ("ml.inf2.xlarge", 0, 0.0)
    assert endpoints[serving.replace("@min", "@max")] == ("ml.inf2.xlarge", 2, round(2 * 0.99 * 730, 2))
    assert "$0.99 per instance-hour while a copy runs" in lines[serving].note
    jobs = {key.split("/", 1)[1]: line for key, line in lines.items() if key.startswith("job ")}
    assert sorted(jobs) == [
        "CompileForNeuron",
        "Export",
        "SelectPareto",
        "Train",
        "TrainSupernet",
        "TrainWithEval",
        "Tune",
    ]
    partition = jobs["CompileForNeuron"]  # LMI's partition: ml.trn1.2xlarge at its 4 h max runtime (REFERENCE.md)
    assert (partition.instance_type, partition.hours) == ("ml.trn1.2xlarge", 4)
    assert partition.usd_total == pytest.approx(1.54 * 4)
    # Train and TrainWithEval are the two sides of the EvalData Choice: one of them runs per execution
    assert jobs["Train"].choice == jobs["TrainWithEval"].choice and jobs["Train"].choice.endswith("/EvalData")
    assert "one of the jobs" in jobs["TrainWithEval"].note
    tune = jobs["Tune"]  # 100 trials x 1 instance x 1 h max runtime, not one run
    assert (tune.instance_type, tune.hours) == ("ml.c5.xlarge", 100) and tune.usd_total == pytest.approx(20.4)
    assert jobs["TrainSupernet"].usd_total == pytest.approx(1.408 * 6)
    one_run = sum(line.usd_total for name, line in jobs.items() if name != "TrainWithEval")
    assert cost.totals_text(result).endswith(cost.money(one_run))
    train = jobs["Train"]  # managed spot: the labelled assumption, and the on-demand ceiling beside it
    assert train.usd_total == pytest.approx(1.515 * 12 * (1 - table.spot_savings))
    assert f"on-demand ceiling {cost.money(1.515 * 12)}" in train.note and table.spot_label in train.note


def test_prod_endpoint_and_training(assemblies, table):
    _, lines = _lines(assemblies, "prod", table)
    at_min = next(line for key, line in lines.items() if key.endswith("@min"))
    at_max = next(line for key, line in lines.items() if key.endswith("@max"))
    assert (at_min.instance_type, at_min.count, at_max.count) == ("ml.inf2.24xlarge", 2, 6)
    assert at_min.usd_total == pytest.approx(2 * 7.79 * 730) and at_max.usd_total == pytest.approx(6 * 7.79 * 730)
    jobs = {key.rsplit("/", 1)[1]: line for key, line in lines.items() if key.startswith("job ")}
    assert sorted(jobs) == ["Benchmark", "CompileForNeuron", "Train", "TrainWithEval"]
    assert jobs.pop("CompileForNeuron").usd_total == pytest.approx(24.73 * 4)  # ml.trn1.32xlarge, 4 h max
    assert jobs.pop("Benchmark").usd_total == pytest.approx(1.408 * 4)  # lm-eval on ml.g5.xlarge, 4 h max
    for train in jobs.values():
        assert train.usd_total == pytest.approx(1.515 * 48) and "spot" not in train.label


def _with_extra_states(template: dict) -> dict:
    """The Training state machine plus a compile (training) job and a processing job it never had."""
    template = copy.deepcopy(template)
    machine = next(r for r in template["Resources"].values() if r["Type"] == "AWS::StepFunctions::StateMachine")
    parts = machine["Properties"]["DefinitionString"]["Fn::Join"][1]
    text = "".join(p if isinstance(p, str) else "TOKEN" for p in parts)
    definition = json.loads(text)
    definition["States"]["CompileForNeuron"] = {
        "Type": "Task",
        "Resource": "arn:aws:states:::sagemaker:createTrainingJob.sync",
        "End": True,
        "Parameters": {
            "ResourceConfig": {"InstanceType": "ml.trn1.2xlarge", "InstanceCount": 1},
            "StoppingCondition": {"MaxRuntimeInSeconds": 7200},
        },
    }
    definition["States"]["Evaluate"] = {
        "Type": "Parallel",
        "End": True,
        "Branches": [
            {
                "StartAt": "Score",
                "States": {
                    "Score": {
                        "Type": "Task",
                        "Resource": "arn:aws:states:::sagemaker:createProcessingJob.sync",
                        "End": True,
                        "Parameters": {
                            "ProcessingResources": {
                                "ClusterConfig": {"InstanceType": "ml.m5.xlarge", "InstanceCount": 2}
                            },
                            "StoppingCondition": {"MaxRuntimeInSeconds": 1800},
                        },
                    }
                },
            }
        ],
    }
    machine["Properties"]["DefinitionString"] = json.dumps(definition)
    return template


def test_a_new_job_state_is_priced_without_a_code_change(assemblies, table):
    stacks = CloudAssemblyReader(assemblies["prod"].directory).by_name()
    training = _with_extra_states(stacks["llm-inf2-prod-Training"].template)
    result = cost.estimate(cost.workload_from_templates({"T": training}), table)
    lines = {line.key: line for line in result.lines}
    assert lines["job T/CompileForNeuron"].usd_total == pytest.approx(1.54 * 2)
    assert lines["job T/Train"].usd_total == pytest.approx(1.515 * 48)
    score = lines["job T/Evaluate/Score"]  # found inside a Parallel branch; no processing price: not guessed
    assert (score.label.startswith("processing job"), score.instance_type, score.count) == (True, "ml.m5.xlarge", 2)
    assert score.usd_total is None and result.problems == [
        "ml.m5.xlarge (processing job T/Evaluate/Score) has no SageMaker processing price for us-east-1 in "
        "tools/prices.json (as of 2026-12-01); add it there with its source instead of guessing"
    ]


@pytest.mark.parametrize(
    ("params", "why"),
    [
        ({"ResourceConfig": {"InstanceType.$": "$.type", "InstanceCount": 1}}, "chosen at run time"),
        (
            {"ResourceConfig": {"InstanceType": "ml.m5.large"}, "StoppingCondition": {"MaxRuntimeInSeconds.$": "$.s"}},
            "cannot bound its runtime",
        ),
    ],
)
def test_an_unbounded_job_is_not_guessed(table, params, why):
    definition = {
        "StartAt": "J",
        "States": {
            "J": {
                "Type": "Task",
                "End": True,
                "Parameters": params,
                "Resource": "arn:aws:states:::sagemaker:createTrainingJob.sync",
            }
        },
    }
    template = {
        "Resources": {
            "M": {
                "Type": "AWS::StepFunctions::StateMachine",
                "Properties": {"DefinitionString": json.dumps(definition)},
            }
        }
    }
    result = cost.estimate(cost.workload_from_templates({"S": template}), table)
    assert len(result.problems) == 1 and why in result.problems[0] and result.lines[0].usd_total is None


def _run(cdk_out: Path):
    return subprocess.run(
        [sys.executable, "-m", "tools.cost", "--cdk-out", str(cdk_out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_cost_cli_prints_every_line_region_and_totals(assemblies):
    proc = _run(Path(assemblies["dev"].directory))
    assert proc.returncode == 0 and proc.stderr == ""
    assert "llm-inf2-dev: on-demand (SageMaker, PrivateLink), us-east-1 (region not pinned" in proc.stdout
    assert "$0.115" in proc.stdout and "before a budget decision" in proc.stdout
    assert "total: endpoints $297.84/month at min scale" in proc.stdout  # the pruning endpoints; serving idles at $0
    # the tuning row: its unit price, what it bills (every trial) and the total of them all, like every row
    tune = next(line for line in proc.stdout.splitlines() if line.startswith("tuning job llm-inf2-dev-Pruning/Tune"))
    assert tune.split()[-5:] == ["1", "h", "$0.204", "$20.40", "per", "run"][-5:] and "100 trials x 1 x 1 h" in tune
    assert "USD/hour each" in proc.stdout and "USD/hour " not in proc.stdout.replace("USD/hour each", "")
    # scope and assumptions are printed, naming what is left out
    scope = {line.split(":", 1)[0]: line for line in proc.stdout.splitlines()}
    assert scope["scope"] == cost.SCOPE and scope["left out"] == cost.LEFT_OUT
    assert scope["assumptions"] == cost.ASSUMPTIONS
    for item in ("S3 storage", "KMS", "CloudWatch", "data transfer", "PrivateLink data processing"):
        assert item in cost.LEFT_OUT, item


def test_cost_cli_fails_with_one_line_on_an_unpriced_type(assemblies, tmp_path):
    head = tmp_path / "prod"
    shutil.copytree(assemblies["prod"].directory, head)
    path = head / "llm-inf2-prod-Training.template.json"
    path.write_text(json.dumps(_with_extra_states(json.loads(path.read_text()))))
    proc = _run(head)
    assert proc.returncode == 1 and proc.stderr.count("\n") == 1
    assert proc.stderr.startswith("cost error: ml.m5.xlarge (processing job llm-inf2-prod-Training/Evaluate/Score)")
    compile_line = next(line for line in proc.stdout.splitlines() if "CompileForNeuron" in line)
    assert "1 x 2 h" in compile_line and compile_line.endswith("$3.08 per run")  # priced lines still printed
    missing = _run(tmp_path / "nothing")
    assert missing.returncode == 2 and missing.stderr.startswith("cost error: ") and missing.stderr.count("\n") == 1


def test_prod_prices_its_interface_vpc_endpoints_per_az(assemblies, table):
    """prod is isolated: every Interface endpoint of the template, once per subnet (AZ), at the PrivateLink price."""
    stacks = CloudAssemblyReader(assemblies["prod"].directory).by_name()
    interface = [
        res
        for art in stacks.values()
        for res in art.template["Resources"].values()
        if res["Type"] == "AWS::EC2::VPCEndpoint" and res["Properties"].get("VpcEndpointType") == "Interface"
    ]
    enis = sum(len(res["Properties"]["SubnetIds"]) for res in interface)
    assert (len(interface), enis) == (6, 12)  # sagemaker.api/runtime, sts, logs, ecr.api/dkr in 2 AZs
    result, lines = _lines(assemblies, "prod", table)
    line = lines["vpc-endpoints llm-inf2-prod-Network"]
    assert line.count == enis and line.unit_price == 0.01 and line.usd_total == pytest.approx(0.01 * 12 * 730)
    assert "6 endpoints, 12 endpoint-AZs" in line.billed
    assert cost.totals_text(result).startswith(
        f"total: endpoints (incl. interface VPC endpoints $87.60/month) {cost.money(2 * 7.79 * 730 + 87.6)}/month"
    )
    source = json.loads(cost.PRICES.read_text())["vpc_interface_endpoint"]
    assert "privatelink/pricing" in source["source"] and source["as_of"]


def test_dev_has_no_interface_endpoint_line(assemblies, table):
    _, lines = _lines(assemblies, "dev", table)
    assert not [key for key in lines if key.startswith("vpc-endpoints ")]


def test_interface_endpoints_in_an_unpriced_region_are_not_guessed(table):
    template = {
        "Resources": {
            "E": {
                "Type": "AWS::EC2::VPCEndpoint",
                "Properties": {"VpcEndpointType": "Interface", "SubnetIds": ["a", "b", "c"]},
            },
            "G": {"Type": "AWS::EC2::VPCEndpoint", "Properties": {"VpcEndpointType": "Gateway"}},
        }
    }
    result = cost.estimate(cost.workload_from_templates({"N": template}, "eu-west-1"), table)
    [line] = result.lines  # the gateway endpoint is free: no line
    assert line.count == 3 and line.usd_total is None
    assert result.problems[0].startswith(
        "interface VPC endpoints (interface VPC endpoints N) have no price for eu-west-1"
    )
