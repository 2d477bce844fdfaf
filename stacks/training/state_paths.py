"""Where the training workflow keeps what one state writes and a later one reads: each path named once.

The execution input's fields, the run (`$.run`: name, capacity attempt, wait, merged hyperparameters), each
job step's result and each registration's. States private to one construct keep their paths there.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..shared.sagemaker_job_step import JobOutput

TRAIN_DATA = "$.train_data"
EVAL_DATA = "$.eval_data"
ERROR = "$.error"


@dataclass(frozen=True)
class RunPaths:
    """`$.run`, written by Prepare and NextAttempt."""

    path: str = "$.run"

    @property
    def name(self) -> str:
        return f"{self.path}.name"

    @property
    def attempt(self) -> str:
        return f"{self.path}.attempt"

    @property
    def wait_seconds(self) -> str:
        return f"{self.path}.wait_seconds"

    @property
    def hyperparameters(self) -> str:
        return f"{self.path}.hyperparameters"


@dataclass(frozen=True)
class PackagePaths:
    """A registered model package version (RegisterModel, RegisterCompiledModel)."""

    path: str

    @property
    def model_package_arn(self) -> str:
        return f"{self.path}.model_package_arn"


RUN = RunPaths()
TRAINING = JobOutput("$.training")
COMPILE = JobOutput("$.compile")
REGISTRY = PackagePaths("$.registry")
REGISTRY_COMPILED = PackagePaths("$.registry_compiled")
APPROVAL = "$.approval"  # the quality gate's decision: status, improvement, min_improvement
