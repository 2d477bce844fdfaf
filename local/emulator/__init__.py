"""A local AWS emulator (moto) that deploys the real synthesized templates: emulation, not AWS.

Used by `make deploy TARGET=local`, `make pipeline` and the deploy and workflow tests. The state machines
execute, their SageMaker jobs run locally (job_runner.py, sagemaker_sync.py); what moto does not model
(alarms, autoscaling, bucket policies) is skipped by moto itself; see README, Local emulation.
"""

from local.cloud_assembly import CloudAssemblyReader, StackArtifact

from .emulator import LocalAws

__all__ = ["CloudAssemblyReader", "LocalAws", "StackArtifact"]
