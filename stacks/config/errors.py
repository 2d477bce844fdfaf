"""The one error type a bad configuration raises: app.py prints it as a single line."""


def one_line(text: str) -> str:
    """Escape line breaks and other control characters (a YAML key may hold any of them)."""
    return "".join(ch if ch.isprintable() else repr(ch)[1:-1] for ch in text)


class ConfigError(ValueError):
    """A configuration value is invalid; the message names file, field, value and fix."""

    def __init__(self, source: str, field: str, problem: str) -> None:
        self.source = source
        self.field = field
        self.problem = problem
        super().__init__(one_line(f"{source}: {field}: {problem}"))
