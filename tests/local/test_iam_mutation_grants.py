"""bench/iam_mutation.py removes exactly one grant (one Action entry on one Resource entry) and keeps the rest."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("iam_mutation", ROOT / "bench" / "iam_mutation.py")
iam_mutation = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(iam_mutation)

READ = {"Sid": "Read", "Effect": "Allow", "Action": ["s3:GetObject", "s3:PutObject"], "Resource": ["a/*", "b/*"]}
START = {"Effect": "Allow", "Action": "states:StartExecution", "Resource": "machine"}


def _template() -> dict:
    return {
        "Resources": {
            "Role": {"Type": "AWS::IAM::Role", "Properties": {}},
            "Jobs": {
                "Type": "AWS::IAM::ManagedPolicy",
                "Properties": {"PolicyDocument": {"Statement": [READ]}, "Roles": [{"Ref": "Role"}]},
            },
            "Rule": {"Type": "AWS::IAM::ManagedPolicy", "Properties": {"PolicyDocument": {"Statement": [START]}}},
            "Target": {"Type": "AWS::Events::Rule", "DependsOn": ["Rule", "Jobs"], "Properties": {}},
        }
    }


def _grant(logical_id: str, action: str, entry: int) -> dict:
    return {"logical_id": logical_id, "inline_policy": None, "statement": 0, "granted": action, "resource_entry": entry}


def test_one_action_on_one_resource_goes_and_every_other_pair_stays():
    mutated = iam_mutation.without(_template(), _grant("Jobs", "s3:GetObject", 0))
    statements = mutated["Resources"]["Jobs"]["Properties"]["PolicyDocument"]["Statement"]
    pairs = {(a, r) for s in statements for a in iam_mutation.as_list(s["Action"]) for r in s["Resource"]}
    assert pairs == {("s3:PutObject", "a/*"), ("s3:PutObject", "b/*"), ("s3:GetObject", "b/*")}


def test_a_policy_left_without_statements_is_removed_with_what_depends_on_it():
    mutated = iam_mutation.without(_template(), _grant("Rule", "states:StartExecution", 0))
    assert "Rule" not in mutated["Resources"]
    assert mutated["Resources"]["Target"]["DependsOn"] == ["Jobs"]


def test_every_action_and_resource_entry_of_an_allow_statement_is_a_grant(tmp_path):
    (tmp_path / "Stack.template.json").write_text(json.dumps(_template()))
    grants = {(g["logical_id"], g["granted"], g["resource_entry"]) for g in iam_mutation.all_grants(tmp_path)}
    assert grants == {
        ("Jobs", "s3:GetObject", 0),
        ("Jobs", "s3:GetObject", 1),
        ("Jobs", "s3:PutObject", 0),
        ("Jobs", "s3:PutObject", 1),
        ("Rule", "states:StartExecution", 0),
    }
