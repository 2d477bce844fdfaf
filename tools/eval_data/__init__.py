"""make eval-data: stage an lm-evaluation-harness task's data as files, for the benchmark job that reads no hub.

    python -m tools.eval_data TASK [--out DIR] [--upload ENV] [--source FOLDER] [--revision REV]

The task's own definition (lm-eval's YAML) names its hub dataset, configuration and splits; each split is read
from the dataset repository (huggingface_hub's snapshot_download, at one commit; or a local copy with --source),
loaded with `datasets` and written as <split>.jsonl beside a copy of the YAML that reads them (`dataset_path:
json`, `dataset_kwargs.data_files` naming the files beside it). --upload puts the folder into the environment's
artifact bucket under training.benchmark.staged_prefix<task>/ (SSE-KMS with the environment's key).
"""
