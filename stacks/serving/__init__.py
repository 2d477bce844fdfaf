"""serving deployment unit."""
