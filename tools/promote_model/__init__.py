"""Promote an Approved model package version into an environment: copy, register, write its model lock.

    python -m tools.promote_model --to prod --version <package ARN>                # from prod's own registry
    python -m tools.promote_model --from dev --to staging --version <package ARN>  # between environments
    make promote FROM=dev TO=staging VERSION=<package ARN>
    python -m tools.promote_model --verify --to staging      # deploy.yml's pre-deploy step (make pre-deploy)

Everything is checked before anything is copied or written: the version is Approved; its recorded facts
(architecture, parameter count, context, heads, size), backend, image, listed instance types and compiled shape
fit the target's serving profile (the synth's own rules, stacks/config/served_model.py); its artifacts are in the
source environment's bucket and readable. Then, between environments: the merged (and compiled) model is copied
into the target's artifact bucket under the same keys, encrypted with the target's KMS key (SSE-KMS), and the
version is registered in the target's model package group as Approved (the source's approval carries over; the
review of the lock's diff is the target's approval), with the source ARN in its metadata. Last,
config/<to>.model.json is written (deterministic JSON): commit it and open the review.

The target's (and source's) bucket, key and group come from the deployed Data stacks' outputs (DescribeStacks).
Environments in separate accounts: --from-profile / --to-profile; the grants it needs are in docs/aws.md
(Promoting across accounts), and a missing one is refused with one line naming it.

`--verify` is the deploy workflow's check of a merged lock, read-only, before the diff: the version the lock names
is in the environment's own group, still Approved, and every object under the lock's prefixes is in the
environment's bucket; else the deploy stops with one line (a lock merged without its promotion's copy would
otherwise create an endpoint that cannot load its model).

Exit codes for a CI step: 0 promoted (stdout: `key=value` lines: model_package_arn, source_model_package_arn, lock,
lock_changed, copied_objects), 2 refused (one stderr line `promote_model: refused: ...`; nothing copied, registered
or written), 1 an AWS error the checks did not foresee (one stderr line).
"""

from tools.promote_model.cli import main
from tools.promote_model.model import Artifacts, DataOutputs, Environment, Promotion, Refused
from tools.promote_model.promote import promote, verify

__all__ = ["Artifacts", "DataOutputs", "Environment", "Promotion", "Refused", "main", "promote", "verify"]
