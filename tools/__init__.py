"""Command-line tools of the project (image table, emulator deploy, invoke, review, cost)."""
