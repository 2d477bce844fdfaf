"""data deployment unit."""
