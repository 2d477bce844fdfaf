"""network deployment unit."""
