"""The ml.trn1 training types an LMI NeuronX partition runs on: NeuronCore-v2, as ml.inf2 (standard library).

SageMaker training offers no ml.inf2 (botocore's TrainingInstanceType); DJL 0.30's partition loads the compiled
model onto NeuronCores, and transformers-neuronx compiles every NEFF for `trn1`, also on inf2 (its
compiler.py), so a Trainium host builds the artifact an Inferentia2 host would build at start-up. Figures:
aws-neuron-sdk about-neuron/arch/neuron-hardware/trn1-arch.rst (chips, host memory; two NeuronCore-v2 per chip).
"""

from __future__ import annotations

from typing import NamedTuple


class Trn1Type(NamedTuple):
    neuron_cores: int
    host_memory_gb: int


TRN1_TYPES: dict[str, Trn1Type] = {
    "ml.trn1.2xlarge": Trn1Type(2, 32),
    "ml.trn1.32xlarge": Trn1Type(32, 512),
    "ml.trn1n.32xlarge": Trn1Type(32, 512),
}
# The TP degrees the Neuron runtime runs (aws-neuron-sdk transformers-neuronx developer guide, "Tensor-parallelism
# support"): a model compiled on Trn1 for Inf2 needs one both have.
TRN1_TP_DEGREES = (1, 2, 8, 32)
INF2_TP_DEGREES = (1, 2, 4, 8, 24)
# The project's estimate of a transformers-neuronx compile's host memory: ~100 GB for Llama-2-7B (6.7 B
# parameters; /work/shared/REFERENCE.md), i.e. ~15 GB per billion parameters. Not an upstream figure.
COMPILE_HOST_GB_PER_BILLION = 15
