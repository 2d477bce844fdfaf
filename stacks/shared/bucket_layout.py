"""The artifact bucket's top-level prefixes, which IAM scopes, workflows and tools agree on."""

DATASETS_PREFIX = "datasets/"
BASE_MODELS_PREFIX = "base-models/"
MODELS_PREFIX = "models/"
CHECKPOINTS_PREFIX = "checkpoints/"
PRUNING_PREFIX = "pruning/"
