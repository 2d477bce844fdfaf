"""The one error type a bad configuration raises: app.py prints it as a single line."""


class ConfigError(Exception):
    """A configuration value is invalid; the message names file, field, value and fix."""

    def __init__(self, source: str, field: str, problem: str) -> None:
        self.source = source
        self.field = field
        self.problem = problem
        super().__init__(f"{source}: {field}: {problem}")
