"""The cheapest serving profile the synth accepts for a recorded base model, and writing it into an environment.

    make profile MODEL=<record name or hub id> BACKEND=<lmi_neuronx|vllm_neuronx> [ENV=<env>]
    python -m tools.profile --model Qwen/Qwen2.5-7B-Instruct --backend vllm_neuronx [--env staging]
    python -m tools.profile --table [--configs tests/data/model_configs] > docs/model-profiles.md

Prints the profile (serving instance type, TP degree, batch, served positions, the compile step's host, volume,
start-up timeouts, LMI's loading timeout, the scale-out cooldown), its price per hour and per month from
tools/prices.json, and the GPU training type that holds the model's QLoRA run (stacks/config/qlora_fit.py).
The candidates and the search live beside the rules they are checked by (stacks/config/profile.py,
profile_search.py): a candidate is the environment's YAML with the profile's lines, accepted only when the synth's
own validation accepts it. Without --env the backend's template environment is used (config/dev.yaml for
lmi_neuronx, config/staging.yaml for vllm_neuronx). With --env the profile and the model are written into
config/<env>.yaml as line edits (tools/config_edit.py: comments and key order kept), after the edited copy loads
with the synth's loader and passes the rehearsal check; changing the backend removes the other backend's section
and the old image settings.

Exit codes: 0 a profile (and, with --env, written); 2 refused: one stderr line, nothing written (no record of the
model, no ml.inf2 profile the synth accepts, a backend that does not load the architecture: the synth's line).
"""

from tools.profile.cli import main

__all__ = ["main"]
