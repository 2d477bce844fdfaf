"""The NAS pruning library that this folder's job scripts run: search spaces and masks (search_space, masks,
params), the super-network training (training, importance), the search and Pareto selection (search, pareto,
results, report), evaluation, the pruned export (export, pruned_bert, compress), the job contract (contract, cli,
metrics, data). Imported from the job's folder, no install: SageMaker runs the scripts beside it."""
