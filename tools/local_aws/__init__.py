"""A local AWS emulator (moto) that deploys the real synthesized templates: emulation, not AWS.

Used by `make deploy TARGET=local` and by the deploy tests. What moto does not model (alarms,
autoscaling, bucket policies, `.sync` Step Functions tasks) is skipped by moto itself; see README.
"""

from tools.cloud_assembly import CloudAssemblyReader, StackArtifact

from .emulator import LocalAws

__all__ = ["CloudAssemblyReader", "LocalAws", "StackArtifact"]
