"""The exceptions that carry a verdict or an exit status: bad usage (exit 2) and a task that broke a rule."""


class UsageError(Exception):
    """Raised for bad command-line usage or unreadable input; the CLI prints it as one line and exits 2."""


class TaskProblem(Exception):
    """A task broke a rule at run time (no Model, wrong types, ...); carries the reason code."""

    def __init__(self, reason: str, detail: str):
        super().__init__(detail)
        self.reason = reason
