"""Reusable constructs; each takes keyword-only typed props."""
