"""The artifact bucket's top-level prefixes, which IAM scopes, workflows and tools agree on.

Each workflow reads its data from its own prefix: the Training rule starts a run on every completion marker
under datasets/, so the pruning workflow's sentence pairs live under pruning-datasets/ instead.
"""

DATASETS_PREFIX = "datasets/"
# Written after a dataset's last shard (`datasets/<name>/_READY`): the one object the Training rule starts on.
DATASET_READY_MARKER = "_READY"
PRUNING_DATASETS_PREFIX = "pruning-datasets/"
BASE_MODELS_PREFIX = "base-models/"
MODELS_PREFIX = "models/"
CHECKPOINTS_PREFIX = "checkpoints/"
PRUNING_PREFIX = "pruning/"
