"""pruning deployment unit."""
