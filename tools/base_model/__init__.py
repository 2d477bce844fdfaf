"""Write a base model's record, config/models/<name>.yaml: the facts the synth knows of it, from its own files.

    python -m tools.base_model meta-llama/Llama-3.1-8B-Instruct          # a hub id: the user's token, no weights
    python -m tools.base_model ./my-model --hub-id org/my-model          # a local folder (config.json, safetensors)
    python -m tools.base_model s3://bucket/base-models/x/ --hub-id org/x   # a copy in S3 (ranged reads)
    make base-model MODEL=<hub id | folder | s3://...> [HUB_ID=...] [UPLOAD=<env>] [FORCE=1]

The record (stacks/config/base_model_record.py) holds config.json's facts (model type, architecture, dtype,
context, heads, K/V heads, head size, widths, vocabulary, tied embeddings), the parameter count (the safetensors
headers, a tied output embedding once; without safetensors, the model transformers builds on the meta device),
whether a chat template ships, whether the hub gates it, and the commit read. It is reviewed and committed like the
model lock. A record already there with other facts is replaced only with --force; the same facts: "unchanged".
Which serving backends load the architecture is printed; a model none loads is refused by the synth, not here.

--upload ENV (the isolated path): the files go to ENV's artifact bucket under base-models/<name>/ with SSE-KMS
and ENV's key, and config/ENV.yaml's training.base_model_key points at them (tools/base_model/upload.py).
Everything that can refuse (the files, the record already there, ENV's deployed Data stack, a complete download of
a hub id) is checked before the record, the bucket or the config is written.

Exit codes: 0 written or unchanged (stdout: what was written, which backends load it, what was uploaded), 2 refused
(one stderr line `base_model: refused: ...`, nothing written), 1 an error the checks did not foresee (one line).
"""

from tools.base_model.cli import main

__all__ = ["main"]
