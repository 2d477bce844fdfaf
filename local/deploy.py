#!/usr/bin/env python3
"""Deploy a synthesized app (cdk.out) to a local AWS emulator and check the wiring.

EMULATION, not AWS: moto on 127.0.0.1 accepts the same templates and the same assets, creates what
it models (buckets, keys, roles, state machines, rules, topics, SageMaker models/configs/endpoints)
and skips what it does not (alarms, autoscaling, bucket policies); the skipped resources are listed.
No model runs on the emulated endpoint; `make pipeline` runs the workflows on the same emulator and serves
the trained model locally with the LMI contract.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from local.emulator import CloudAssemblyReader, LocalAws  # noqa: E402
from local.emulator.emulator import DeployError  # noqa: E402
from local.emulator.workflow_run import rule_name  # noqa: E402


def _role_exists(aws: LocalAws, role_arn: str) -> bool:
    iam = aws.client("iam")
    try:
        iam.get_role(RoleName=role_arn.rsplit("/", 1)[-1])
    except iam.exceptions.NoSuchEntityException:
        return False
    return True


def check_wiring(aws: LocalAws, stack_name: str) -> list[str]:
    """Problems found in one deployed stack (empty list = wired): endpoints, machines, rules, roles."""
    problems: list[str] = []
    sagemaker, sfn, events = aws.client("sagemaker"), aws.client("stepfunctions"), aws.client("events")
    for logical_id, res in aws.resources(stack_name).items():
        kind, physical = res.get("ResourceType"), res.get("PhysicalResourceId", "")
        if kind == "AWS::SageMaker::Endpoint":
            name = physical.rsplit("/", 1)[-1]
            status = sagemaker.describe_endpoint(EndpointName=name)["EndpointStatus"]
            if status != "InService":
                problems.append(f"{logical_id}: endpoint {name} is {status}")
        elif kind == "AWS::SageMaker::Model":
            role = sagemaker.describe_model(ModelName=physical.rsplit("/", 1)[-1])["ExecutionRoleArn"]
            if not _role_exists(aws, role):
                problems.append(f"{logical_id}: execution role {role} does not exist")
        elif kind == "AWS::StepFunctions::StateMachine":
            role = sfn.describe_state_machine(stateMachineArn=physical)["roleArn"]
            if not _role_exists(aws, role):
                problems.append(f"{logical_id}: state machine role {role} does not exist")
        elif kind == "AWS::Events::Rule":
            for target in events.list_targets_by_rule(Rule=rule_name(physical))["Targets"]:
                if target.get("RoleArn") and not _role_exists(aws, target["RoleArn"]):
                    problems.append(f"{logical_id}: target role {target['RoleArn']} does not exist")
    return problems


def deploy(cdk_out: Path, stacks: list[str] | None, aws: LocalAws) -> int:
    reader = CloudAssemblyReader(cdk_out)
    ordered = reader.in_dependency_order(stacks)
    print(f"EMULATION: deploying {len(ordered)} stack(s) from {cdk_out} to moto at {aws.endpoint_url}")
    aws.bootstrap()
    uploaded = aws.publish_assets(cdk_out, ordered)
    print(f"  published {len(uploaded)} asset file(s) to s3://{aws.assets_bucket}")
    failures = 0
    for stack in ordered:
        started = time.monotonic()
        outputs = aws.deploy_stack(stack)
        status = aws.status(stack.stack_name)
        print(f"\n{stack.stack_name}: {status} in {time.monotonic() - started:.1f}s")
        for key in sorted(outputs):
            print(f"  {key} = {outputs[key]}")
        skipped = aws.skipped_resources(stack)
        if skipped:
            kinds = sorted(set(skipped.values()))
            print(f"  not modelled by the emulator (skipped): {len(skipped)} x {', '.join(kinds)}")
        problems = check_wiring(aws, stack.stack_name)
        for problem in problems:
            print(f"  WIRING PROBLEM: {problem}")
        failures += len(problems)
    print("\nwiring: " + ("OK" if failures == 0 else f"{failures} problem(s)"))
    return 0 if failures == 0 else 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cdk-out", type=Path, default=ROOT / "cdk.out", help="synthesized app (make synth)")
    parser.add_argument("--stack", action="append", help="deploy only this stack (and its dependencies)")
    parser.add_argument("--port", type=int, default=None, help="emulator port (default: a free one)")
    parser.add_argument("--keep", action="store_true", help="keep the emulator running until Ctrl-C")
    args = parser.parse_args(argv)
    if not (args.cdk_out / "manifest.json").is_file():
        print(f"deploy error: {args.cdk_out}/manifest.json missing; run `make synth` first", file=sys.stderr)
        return 2
    with LocalAws.start(port=args.port) as aws:
        try:
            code = deploy(args.cdk_out, args.stack, aws)
        except DeployError as err:
            print(f"deploy error: {err}", file=sys.stderr)
            return 1
        if args.keep:
            print(f"\nemulator kept at {aws.endpoint_url} (AWS_ENDPOINT_URL={aws.endpoint_url}); Ctrl-C to stop")
            keys = " ".join(f"{k}={v}" for k, v in aws.credentials_environment().items())
            print(f"IAM is enforced: the operator's keys (allowed everything): export {keys}")
            try:
                while True:
                    time.sleep(3600)
            except KeyboardInterrupt:
                pass
    return code


if __name__ == "__main__":
    sys.exit(main())
