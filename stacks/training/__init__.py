"""training deployment unit."""
