"""The one exception type that means bad usage or bad input (exit status 2, one line, no traceback)."""


class UsageError(Exception):
    """Raised for bad command-line usage or unreadable input; the CLI prints it as one line and exits 2."""
