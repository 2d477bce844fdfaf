"""The benchmark evaluation job (benchmark.py beside train.py): EleutherAI's lm-evaluation-harness on the merged
model and on its base, on tasks whose files are staged in a channel."""
