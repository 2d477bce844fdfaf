"""The vLLM Neuron compile step's program: `optimum-cli export neuron` of the merged model in the serving image.

The Training workflow runs it as a SageMaker training job on a CPU instance (training jobs cannot use ml.inf2;
`--instance_type inf2` makes the export target Inferentia2 without the device), the image's own program through
`ContainerEntrypoint` (stacks/training/compile_job.py). Output: serving.neuron's folder,
`neuron/bs<B>-seq<S>-tp<T>/`. `generation_config.json` is copied beside the export, which leaves it out.

The command is `bash -c <script> neuron-export <flag> <value> ...`: the short script as the `-c` string, which runs
`optimum-cli export neuron "$@"`, and every flag and value its own argument (CreateTrainingJob's 256 characters
per item).
"""

from __future__ import annotations

from ..backend import MODEL_CHANNEL, OUTPUT_DIR
from .config import NeuronOptions

GENERATION_CONFIG = f"{MODEL_CHANNEL}/generation_config.json"
# The `-c` script: export with the arguments after it, then copy the generation config the export leaves out.
EXPORT_SCRIPT = (
    'set -euo pipefail; optimum-cli export neuron "$@"; '
    f"if [ -f {GENERATION_CONFIG} ]; then cp {GENERATION_CONFIG} {OUTPUT_DIR}/; fi"
)
SCRIPT_NAME = "neuron-export"  # the script's $0 (bash -c takes the first word after the script as $0)


def export_entrypoint() -> tuple[str, ...]:
    """`bash -c <script> <$0>`: the container's program; the arguments become the script's "$@"."""
    return ("/bin/bash", "-c", EXPORT_SCRIPT, SCRIPT_NAME)


def export_arguments(neuron: NeuronOptions) -> tuple[str, ...]:
    """`optimum-cli export neuron`'s arguments, one item each: serving.neuron's shape, for Inferentia2."""
    return (
        "--model",
        MODEL_CHANNEL,
        "--task",
        "text-generation",
        *neuron.export_arguments(),
        "--instance_type",
        "inf2",
        OUTPUT_DIR,
    )
